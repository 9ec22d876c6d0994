"""Problem details (RFC 9457, `application/problem+json`): every error a route raises, and
every request FastAPI refuses, is answered in the one shape `Problem`.

`create_app` registers the handlers below; the ASGI layers in `streams.gateway.middleware`,
which answer before FastAPI sees the request, write the same shape themselves.
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

import structlog
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from schemas.errors import validation_reason
from schemas.gateway import FieldError, Problem
from streams.gateway.errors import GatewayError

log = structlog.get_logger("lychee.gateway")

PROBLEM = "application/problem+json"


def problem(
    status: int,
    title: str,
    detail: str,
    instance: str | None = None,
    errors: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail, instance=instance, errors=errors)
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=PROBLEM, headers=headers
    )


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "path", "query", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def _field_error(e: dict[str, Any]) -> FieldError:
    if e["type"] == "json_invalid":  # loc is ("body", the character where parsing stopped)
        reason = e.get("ctx", {}).get("error", e["msg"])
        return FieldError(
            field="body", message=f"not valid JSON at character {e['loc'][-1]}: {reason}"
        )
    return FieldError(field=_field(tuple(e["loc"])), message=validation_reason(e))


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [_field_error(e) for e in exc.errors()]
    detail = "; ".join(f"{e.field}: {e.message}" for e in errors)
    return problem(422, "Invalid request", detail, request.url.path, errors)


async def gateway_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GatewayError)
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    errors = [FieldError(field=exc.field, message=exc.detail)] if exc.field else None
    return problem(exc.status, exc.title, exc.detail, request.url.path, errors, headers)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return problem(
        exc.status_code,
        getattr(exc, "title", None) or HTTPStatus(exc.status_code).phrase,
        _unreadable(exc) or str(exc.detail),
        request.url.path,
        headers=dict(exc.headers or {}),
    )


FASTAPI_UNREADABLE = "There was an error parsing the body"  # its 400 for a body it cannot read


def _unreadable(exc: StarletteHTTPException) -> str | None:
    """Why FastAPI could not read a body it answers 400 for, when the cause says."""
    if exc.status_code != 400 or exc.detail != FASTAPI_UNREADABLE:
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8: {cause.reason} at byte {cause.start}"
    if isinstance(cause, RecursionError):
        return "the body's JSON nests too deeply to be read"
    if isinstance(cause, ValueError) and "digits" in str(cause):  # Python's int size limit
        limit = sys.get_int_max_str_digits()
        return f"the body holds a number far larger than any field takes (over {limit:,} digits)"
    return None


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """A 500 that closes its connection: Starlette raises the error on to the server after
    this response, and uvicorn then drops the connection, so a client that kept it for its
    next request would meet a reset instead of an answer."""
    log.error("gateway.unhandled", path=request.url.path, error=repr(exc))
    detail = f"{type(exc).__name__}"
    return problem(500, "Internal error", detail, request.url.path, headers={"Connection": "close"})
