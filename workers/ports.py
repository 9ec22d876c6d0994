"""The small interfaces a stage needs from the outside world (STYLE 3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from schemas.errors import LycheeError


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


class Unprocessable(LycheeError):
    """This message can never be processed as it is: dead-letter it now, with this reason."""


class TemporarilyUnavailable(LycheeError):
    """A dependency is down for now: retry later (pausing consumption), never drop the work.
    `tokens_per_s`: how fast an LLM was writing when it last wrote, so that a pause says
    whether the model is down or only slow."""

    def __init__(
        self, message: str, retry_after_s: float | None = None, tokens_per_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.tokens_per_s = tokens_per_s


class Refused(TemporarilyUnavailable):
    """A dependency refuses every request until someone fixes the configuration (a 401, 403 or
    404: key, permissions, model name). Nothing is wrong with the message, so the stage pauses
    like for an outage and keeps saying why (`hint` names what to check); it never drops work."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, None)
        self.hint = hint
