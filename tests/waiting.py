"""Waiting for a condition in tests: one bounded poll, in a sync and an async form.

A test that waits for something (a port, a reply, a row, a stage's pause) polls the thing
itself with `wait_until` or `eventually`, and fails naming what it waited for and the last
value it saw. A test never proves a wait or an absence by sleeping a fixed time: it polls
the state that shows it (a metric, a receipt, a consumer group's lag), sets an event, or
injects a clock.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

SHOWN_CHARS = 2000  # of the last value, in the failure message


def wait_until(
    probe: Callable[[], T],
    *,
    what: str,
    until: Callable[[T], object] = bool,
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
) -> T:
    """Call `probe` every `interval_s` until `until` holds for its value (by default: the
    value is truthy), and return that value; fail after `timeout_s`. An exception from
    `probe` (a process that died meanwhile, say) ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout_s, value))
        time.sleep(interval_s)


@overload
async def eventually(
    probe: Callable[[], Awaitable[T]],
    *,
    what: str,
    until: Callable[[T], object] = ...,
    timeout_s: float = ...,
    interval_s: float = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T],
    *,
    what: str,
    until: Callable[[T], object] = ...,
    timeout_s: float = ...,
    interval_s: float = ...,
) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    *,
    what: str,
    until: Callable[[Any], object] = bool,
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
) -> Any:
    """`wait_until` for a test's event loop: `probe` may be a coroutine function, and the
    loop runs other tasks (the one being waited for, often) between the calls."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout_s, value))
        await asyncio.sleep(interval_s)


def _timed_out(what: str, timeout_s: float, value: object) -> str:
    seen = repr(value)
    if len(seen) > SHOWN_CHARS:
        seen = seen[:SHOWN_CHARS] + "..."
    return f"waited {timeout_s:g} s for {what}; last seen: {seen}"
