"""The gateway's errors: each request error carries its HTTP status and, where one is to
blame, the field; the configuration errors stop the gateway before it serves.

Routes turn the request errors into `application/problem+json`; MCP tools into tool errors
with the same text.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from aiokafka.errors import KafkaConnectionError

from schemas.errors import LycheeError
from streams.errors import BrokerUnreachable

if TYPE_CHECKING:
    from streams.settings import Settings


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


class NotFound(GatewayError, LookupError):
    status = 404
    title = "Not Found"


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
    def backend(cls, exc: BaseException, where: str) -> Unavailable:
        """The broker or Redis (`where`: "Kafka at ...") failed a call: worth retrying in a
        second."""
        return cls(f"{where}: {reason(exc)}", retry_after_s=1.0)


class StackUnreachable(Unavailable):
    """Kafka or Redis did not answer; `checks` holds `ok` or the reason for each."""

    def __init__(self, detail: str, checks: dict[str, str]) -> None:
        super().__init__(detail, retry_after_s=1.0)
        self.checks = checks


class UpstreamFailed(GatewayError):
    status = 502
    title = "Query service error"


class Timeout(GatewayError, TimeoutError):
    status = 504
    title = "Timed out"


class UnsupportedMediaType(GatewayError):
    status = 415
    title = "Unsupported media type"


# -- before serving: the gateway's own configuration -------------------------------------------


class KeyFileError(LycheeError, ValueError):
    """The keys file is missing, unreadable or malformed; the message says where."""


class GatewayConfigError(LycheeError, ValueError):
    """The gateway cannot start as configured; the message says what to change."""


def kafka_at(settings: Settings) -> str:
    return f"Kafka at {settings.kafka.bootstrap}"


def redis_at(settings: Settings) -> str:
    """Where Redis is, without its password."""
    parts = urlsplit(settings.redis.url)
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
        parts = parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else ""))
    return f"Redis at {urlunsplit(parts)}"


def reason(exc: BaseException) -> str:
    """Why a backend failed, in a few words ("connection refused"), else its one-line text."""
    cause = exc if isinstance(exc, OSError) else exc.__context__
    if isinstance(cause, socket.gaierror) and cause.strerror:
        return cause.strerror.lower()
    if isinstance(cause, OSError) and cause.errno and cause.errno > 0:
        return os.strerror(cause.errno).lower()
    if isinstance(exc, KafkaConnectionError | BrokerUnreachable):
        return "no broker answers"
    if isinstance(exc, TimeoutError) and not str(exc):
        return "no answer in time"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
