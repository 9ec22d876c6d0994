"""Where a request's time goes: the stages' laps (`timings_ms` of a reply, Prometheus'
`lychee_retrieval_seconds`, and one span per stage when tracing) and the recall channels'
own time inside their worker threads."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from opentelemetry.trace import Span

from workers import telemetry

T = TypeVar("T")


class Stopwatch:
    """Milliseconds per stage of one request, and its total."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round((now - since) * 1e3, 3)
        return now

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[Span]:
        """Time the block as the stage `name`, and trace it as the span `query.<name>`."""
        since = time.perf_counter()
        try:
            with telemetry.span(f"query.{name}") as span:
                yield span
        finally:
            self.lap(name, since)

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self._t0) * 1e3, 3)
        return self.timings


class ChannelTimes:
    """Milliseconds spent per recall channel, summed over the channel's searches and measured
    inside their threads (waits for a thread or the fan-out bound are not counted)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._lock = threading.Lock()

    def call(self, channel: str, fn: Callable[..., T], *args: Any) -> T:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            spent = (time.perf_counter() - t0) * 1e3
            with self._lock:
                self.ms[channel] = self.ms.get(channel, 0.0) + spent
