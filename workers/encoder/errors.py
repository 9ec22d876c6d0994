"""The encoder's errors, under the root error: each says what the stage does about a segment.

`LLMUnavailable`: the server is overloaded or unreachable, so pause and retry the segment
later, never drop it. `InvalidEncoderOutput`: the reply stayed unusable after one repair, so
dead-letter the segment. A bare `EncoderError`: the server refused the request.
"""

from __future__ import annotations

from schemas.errors import LycheeError


class EncoderError(LycheeError):
    """Root of the encoder's errors; raised as such for requests the server refuses (4xx)."""


class LLMUnavailable(EncoderError):
    """Rate-limited, failing or unreachable after the bounded retries: retry the segment later."""

    def __init__(
        self, message: str, retry_after_s: float | None = None, tokens_per_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.tokens_per_s = tokens_per_s


class InvalidEncoderOutput(EncoderError):
    """The reply is not the JSON asked for, even after the repair retry: dead-letter it."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"invalid encoder output: {reason}")
        self.raw = raw
        self.reason = reason
