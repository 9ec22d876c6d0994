"""The gateway's errors: each carries its HTTP status and, where one is to blame, the field.

Routes turn them into `application/problem+json`; MCP tools into tool errors with the same
text.
"""

from __future__ import annotations

from schemas.errors import LycheeError


class GatewayError(LycheeError):
    status = 500
    title = "Internal error"

    def __init__(
        self,
        detail: str,
        *,
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.retry_after_s = retry_after_s


class Unauthorized(GatewayError):
    status = 401
    title = "Unauthorized"


class Forbidden(GatewayError, PermissionError):
    status = 403
    title = "Forbidden"


class Invalid(GatewayError, ValueError):
    status = 422
    title = "Invalid request"


class TooLarge(GatewayError, ValueError):
    status = 413
    title = "Request too large"


class Conflict(GatewayError, ValueError):
    status = 409
    title = "Conflict"


class Unavailable(GatewayError):
    status = 503
    title = "Service unavailable"

    @classmethod
    def backend(cls, exc: BaseException) -> Unavailable:
        """The broker or Redis failed a call: worth retrying in a second."""
        return cls(f"{type(exc).__name__}: {exc}", retry_after_s=1.0)


class UpstreamFailed(GatewayError):
    status = 502
    title = "Query service error"


class Timeout(GatewayError, TimeoutError):
    status = 504
    title = "Timed out"


class UnsupportedMediaType(GatewayError):
    status = 415
    title = "Unsupported media type"
