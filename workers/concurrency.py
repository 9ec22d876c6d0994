"""Bounded fan-out (STYLE 14): gather awaitables with at most `limit` running at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def gather_bounded(awaitables: Iterable[Awaitable[T]], limit: int) -> list[T]:
    """Like `asyncio.gather`, results in order, but never more than `limit` in flight."""
    gate = asyncio.Semaphore(max(1, limit))

    async def one(aw: Awaitable[T]) -> T:
        async with gate:
            return await aw

    return list(await asyncio.gather(*(one(aw) for aw in awaitables)))
