"""The small interfaces a stage needs from the outside world (STYLE 3).

What an implementation of a port raises to say what becomes of the message (`Unprocessable`,
`TemporarilyUnavailable`, `Refused`) is in `workers.errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class OutMessage:
    topic: str
    key: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()  # lineage (workers.forget): where it came from


class Publisher(Protocol):
    async def publish(self, messages: Sequence[OutMessage]) -> None:
        """Return only once every message is acknowledged by the broker."""
        ...


class ListPublisher:
    """A publisher that keeps what it is given: for tests and offline runs."""

    def __init__(self) -> None:
        self.messages: list[OutMessage] = []

    async def publish(self, messages: Sequence[OutMessage]) -> None:
        self.messages.extend(messages)
