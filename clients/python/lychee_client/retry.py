"""The retry rule shared by the sync and async clients: which answers are worth another
try, and how long to wait before it (the gateway's Retry-After, bounded)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

RETRIED_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all; between two, the server's Retry-After when it sent one, else
    jittered exponential backoff from `backoff_s`, never more than `max_wait_s`.

    Only 429 and 503 are retried, and connection failures before a request was sent. A 503
    to an add can follow a broker that acked late; the gateway asks for the same request
    again, and the client gives every exchange an id before the first try, so a retry is
    answered with the first receipt rather than adding twice. A timed-out or reset request is
    not retried: whether the gateway acted on it is unknown.
    """

    attempts: int = 4
    backoff_s: float = 0.5
    max_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1 (the first try), got {self.attempts}")
        if self.backoff_s < 0 or self.max_wait_s < 0:
            raise ValueError("backoff_s and max_wait_s must not be negative")

    def wait_s(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait after failed try `attempt` (1-based)."""
        advised = retry_after_s(response) if response is not None else None
        if advised is None:
            advised = self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random())
        return max(0.0, min(advised, self.max_wait_s))


NO_RETRY = RetryPolicy(attempts=1)


def retry_after_s(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (delta-seconds or an HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retried(response: httpx.Response) -> bool:
    return response.status_code in RETRIED_STATUSES


def unsent(exc: httpx.TransportError) -> bool:
    """A failure before the request reached the gateway: safe to send again."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
