"""The query path's errors, under the one root error.

The planner falls back to the heuristic plan on `PlanReplyError`; the service turns
`AnswerUnavailable` into an error note on the reply; `AdapterError` stops a start-up whose
question adapter cannot be used, `ScorerError` one whose second-stage scorer file cannot.
"""

from __future__ import annotations

from schemas.errors import LycheeError
from schemas.records import TokenUsage


class AnswerUnavailable(LycheeError):
    """No usable answer: the server refused the request, kept failing through the bounded
    retries, or replied with nothing. `usage` is what the failed attempt still spent."""

    def __init__(
        self,
        reason: str,
        *,
        retry_after_s: float | None = None,
        usage: TokenUsage | None = None,
    ) -> None:
        super().__init__(f"answer unavailable: {reason}")
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.usage = usage or TokenUsage()


class PlanReplyError(LycheeError, ValueError):
    """The planner's reply cannot become a plan; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"unusable plan reply: {reason}")
        self.reason = reason


class AdapterError(LycheeError):
    """An adapter file that cannot be read or does not fit the embedding model."""


class ScorerError(LycheeError):
    """A scorer file that cannot be read or does not weigh the scorer's `FEATURES`."""
