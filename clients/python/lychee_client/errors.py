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
    it gave one (429, 503), after the client's `attempts` tries were spent."""

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        problem: Problem,
        retry_after_s: float | None,
        attempts: int = 1,
    ) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.problem = problem
        self.retry_after_s = retry_after_s
        self.attempts = attempts
        tries = f" (after {attempts} tries)" if attempts > 1 else ""
        super().__init__(f"{method} {path}: {status} {problem.title}: {problem.detail}{tries}")


class GatewayUnreachable(ClientError, ConnectionError):
    """No answer at all (refused, reset, timed out) after the client's retries."""


class GatewayTimedOut(GatewayUnreachable, TimeoutError):
    """The request was sent and no answer came within the client's `timeout_s`: the gateway
    may have done the work (an add sent again is answered with its first receipt)."""
