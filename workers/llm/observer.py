"""What a caller hears of each attempt of an LLM call: its duration, its failure as a metric
label, and what streamed. Metrics live in `streams/`; this is the boundary they listen at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import openai

from workers.llm.completion import Completion
from workers.llm.errors import StreamCut


def failure_reason(exc: BaseException) -> str:
    """A failed attempt's metric label: http_429, http_4xx, http_5xx, timeout or connection."""
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        return "http_429" if code == 429 else f"http_{code // 100}xx"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError | StreamCut):
        return "connection"
    return "other"


@dataclass(frozen=True)
class Attempt:
    """One attempt of a call as an observer hears it: `failure` is None when it completed,
    else `failure_reason`; `completion` is the reply, or what streamed before the failure
    (None when nothing did)."""

    seconds: float
    failure: str | None
    completion: Completion | None


class CallObserver(Protocol):
    """Hears each attempt of a call and each retry, at our own call boundary, so that what
    is measured does not depend on the HTTP library inside the SDK (metrics live in
    `streams/`)."""

    def attempt(self, model: str, attempt: Attempt) -> None:
        """One attempt ended (time to first token and tokens/s are in its completion)."""
        ...

    def retry(self, model: str) -> None:
        """The call is about to be tried again after a retryable failure."""
        ...


class NoObserver:
    def attempt(self, model: str, attempt: Attempt) -> None:
        return None

    def retry(self, model: str) -> None:
        return None
