"""How one LLM call is retried: which failures are worth another attempt (`is_retryable`),
how long the server asks us to wait (`retry_after_s`), and the bounds of the attempts
(`RetryPolicy`). `sleep` and `rng` are passed in by the caller, so that tests replay a
call's waits without waiting."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import openai

from workers.llm.errors import StreamCut, StreamTimeout
from workers.llm.stream import StreamLimits

Sleep = Callable[[float], Awaitable[None]]


def is_retryable(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, server errors, timeouts, lost connections and
    streams cut in the middle."""
    if isinstance(exc, openai.APIConnectionError | TimeoutError | StreamCut):
        return True  # APITimeoutError and StreamTimeout included
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def retry_after_s(exc: BaseException) -> float | None:
    """The server's wait hint (`retry-after-ms`, or `Retry-After` in seconds or as a date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(float(ms) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def describe(exc: BaseException) -> str:
    """A short name for a failed attempt: `HTTP 503`, `timed out (...)`, `stream cut (...)`
    or the error's type."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, StreamTimeout):
        return f"timed out: {exc}"
    if isinstance(exc, StreamCut):
        return f"stream cut: {exc}"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError) and exc.__cause__ is not None:
        cause = str(exc.__cause__).strip() or type(exc.__cause__).__name__
        return f"{type(exc).__name__} ({cause[:200]})"  # "connection refused", a DNS error
    return type(exc).__name__


@dataclass(frozen=True)
class RetryPolicy:
    """How one LLM call is tried: attempts; the silence limits of each streamed attempt
    (before the first token, between chunks) and its total limit; the full-jitter backoff
    between attempts (`uniform(0, min(max_delay_s, base_delay_s * 2**n))`); and after a
    timeout (we closed the stream), at least `settle_s` before the retry, so that the server has
    noticed the closed connection and stopped the generation the retry replaces (llama.cpp
    polls its client's connection every second)."""

    max_attempts: int = 3
    first_token_s: float = 300.0
    gap_s: float = 60.0
    total_s: float = 3600.0
    base_delay_s: float = 0.25
    max_delay_s: float = 4.0
    settle_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def with_(self, **changes: Any) -> RetryPolicy:
        """This policy with some fields changed (None leaves a field as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def limits(self) -> StreamLimits:
        return StreamLimits(self.first_token_s, self.gap_s, self.total_s)
