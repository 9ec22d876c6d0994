"""What the HTTP client raises: one type for every answer that is not a success, carrying the
status and the gateway's problem details, and one for a gateway that could not be reached."""

from __future__ import annotations

from schemas.errors import LycheeError
from schemas.gateway import Problem


class ClientError(LycheeError):
    """Root of the client's errors."""


class LycheeHTTPError(ClientError):
    """The gateway answered `status` with a problem (RFC 9457): `problem.detail` says why,
    `problem.errors` names the fields at fault; `retry_after_s` is the gateway's advice when
    it gave one (429, 503), after the client's `attempts` tries were spent. The message names
    the whole URL the request went to (`url`: the client's base URL and the route's `path`),
    so a base URL that already ends in `/v1` shows as the `/v1/v1/...` that got the 404."""

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        problem: Problem,
        retry_after_s: float | None,
        attempts: int = 1,
        url: str | None = None,
    ) -> None:
        self.method = method
        self.path = path
        self.url = url or path
        self.status = status
        self.problem = problem
        self.retry_after_s = retry_after_s
        self.attempts = attempts
        tries = f" (after {attempts} tries)" if attempts > 1 else ""
        super().__init__(f"{method} {self.url}: {status} {problem.title}: {problem.detail}{tries}")


class ClientClosed(ClientError):
    """The client (or the client whose connections it shares) was closed: make another."""


class ListingChanged(ClientError):
    """A listing changed between its pages on every read (writes and forgets going on all
    the while): what was read would have skipped or repeated rows."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        super().__init__(f"the listing changed between its pages on each of {reads} reads")


class UnreadableReply(ClientError, ValueError):
    """The gateway answered with a success this client cannot read: a gateway newer than the
    client (a reply of a contract version it does not know), or not a gateway at all."""


class GatewayUnreachable(ClientError, ConnectionError):
    """No answer at all (refused, reset, timed out) after the client's retries."""


class GatewayTimedOut(GatewayUnreachable, TimeoutError):
    """The request was sent and no answer came within the client's `timeout_s`: the gateway
    may have done the work (an add sent again is answered with its first receipt)."""
