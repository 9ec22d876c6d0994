"""The HTTP gateway: REST routes over the same topics as every other client, MCP at /mcp, and
the console at / (issue 27) over the same routes.

Every `/v1/namespaces/{namespace}/...` route takes the namespace through one dependency,
`AuthorizedNamespace` (streams.gateway.deps), which authenticates the API key (401) and
checks that the key may use the namespace (403) before the body is even read. A new route
(the listing and forget routes of issue #12) gets both by declaring
`namespace: AuthorizedNamespace`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import date
from typing import Annotated, Any

import orjson
import structlog
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import make_asgi_app
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from schemas import ControlKind, QueryReply
from schemas.base import Name
from schemas.records import MemoryType
from streams import metrics
from streams.gateway import console, dead_letters, views
from streams.gateway.auth import KeyRing, Principal, host_name, is_loopback, presented_key
from streams.gateway.connection import StackConnection
from streams.gateway.deps import AuthorizedNamespace, Service, SessionId
from streams.gateway.errors import GatewayError
from streams.gateway.mcp import build_mcp, request_principal
from streams.gateway.models import (
    AddExchanges,
    ControlIn,
    ControlReceipt,
    FieldError,
    ForgetOut,
    NamespaceStatus,
    Problem,
    Receipt,
    RecordsPage,
    SearchIn,
)
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway")

PROBLEM = "application/problem+json"
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# -- routes ------------------------------------------------------------------------------------

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {PROBLEM: {}}} for code in (401, 403, 422, 503)
}
router = APIRouter(prefix="/v1/namespaces/{namespace}", responses=_PROBLEMS)


@router.post(
    "/exchanges",
    status_code=202,
    response_model=Receipt,
    responses={409: {"model": Problem}, 413: {"model": Problem}},
)
async def add_exchanges(
    namespace: AuthorizedNamespace, body: AddExchanges, svc: Service
) -> Receipt:
    """Add one or many exchanges; 202 with a receipt once the broker acked them.

    Re-sending an exchange id returns its first receipt (`duplicate: true`) and adds nothing.
    Without `seq` the gateway numbers each session's exchanges in arrival order.
    """
    return await svc.add(namespace, body.exchanges)


@router.post("/sessions/{session_id}/flush", status_code=202, response_model=ControlReceipt)
async def flush_session(
    namespace: AuthorizedNamespace,
    session_id: SessionId,
    svc: Service,
    body: ControlIn | None = None,
) -> ControlReceipt:
    """Close the session's open segment now, so that it is consolidated into records."""
    after = body.after_seq if body else None
    return await svc.control(ControlKind.flush, namespace, session_id, after)


@router.post("/sessions/{session_id}/end", status_code=202, response_model=ControlReceipt)
async def end_session(
    namespace: AuthorizedNamespace,
    session_id: SessionId,
    svc: Service,
    body: ControlIn | None = None,
) -> ControlReceipt:
    """Close the open segment and end the session (its segmenter state is dropped)."""
    after = body.after_seq if body else None
    return await svc.control(ControlKind.end_session, namespace, session_id, after)


@router.post(
    "/search",
    response_model=QueryReply,
    responses={502: {"model": Problem}, 504: {"model": Problem}},
)
async def search(namespace: AuthorizedNamespace, body: SearchIn, svc: Service) -> QueryReply:
    """Evidence for a question through the request/reply topics; with `wait_for` (a receipt),
    only once that receipt is searchable (bounded by `timeout_s`)."""
    return await svc.search(namespace, body)


@router.get("/records", response_model=RecordsPage)
async def list_records(
    namespace: AuthorizedNamespace,
    svc: Service,
    session_id: Annotated[Name | None, Query(description="one session only")] = None,
    memory_type: Annotated[MemoryType | None, Query(description="one memory type only")] = None,
    since: Annotated[date | None, Query(description="records from this day on")] = None,
    turns: Annotated[bool, Query(description="raw turns instead of records")] = False,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RecordsPage:
    """What is remembered about the namespace (or one session), oldest first, a page at a
    time: memory records, or the raw turns with `turns=true`."""
    kind = memory_type.value if memory_type else None
    return await svc.records(namespace, session_id, kind, since, turns, page, page_size)


@router.delete(
    "/sessions/{session_id}",
    response_model=ForgetOut,
    responses={502: {"model": Problem}, 504: {"model": Problem}},
)
async def forget_session(
    namespace: AuthorizedNamespace, session_id: SessionId, svc: Service
) -> ForgetOut:
    """Forget one session everywhere (its turns, the records only it supports, their links,
    its state); returns the receipt once every stage confirmed."""
    return await svc.forget(namespace, session_id)


@router.delete(
    "", response_model=ForgetOut, responses={502: {"model": Problem}, 504: {"model": Problem}}
)
async def forget_namespace(namespace: AuthorizedNamespace, svc: Service) -> ForgetOut:
    """Forget the whole namespace everywhere; returns the receipt once every stage confirmed."""
    return await svc.forget(namespace)


@router.get("/status", response_model=NamespaceStatus)
async def status(
    namespace: AuthorizedNamespace,
    svc: Service,
    session_id: Annotated[Name | None, Query(description="one session only")] = None,
) -> NamespaceStatus:
    """Per session: the last seq accepted, segmented and indexed, and whether all accepted is
    searchable."""
    return await svc.status(namespace, session_id)


# -- problems ----------------------------------------------------------------------------------


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


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [FieldError(field=_field(tuple(e["loc"])), message=e["msg"]) for e in exc.errors()]
    detail = "; ".join(f"{e.field}: {e.message}" for e in errors)
    return problem(422, "Invalid request", detail, request.url.path, errors)


async def _gateway_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GatewayError)
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    errors = [FieldError(field=exc.field, message=exc.detail)] if exc.field else None
    return problem(exc.status, exc.title, exc.detail, request.url.path, errors, headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return problem(
        exc.status_code,
        str(exc.detail),
        str(exc.detail),
        request.url.path,
        headers=dict(exc.headers or {}),
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("gateway.unhandled", path=request.url.path, error=repr(exc))
    return problem(500, "Internal error", f"{type(exc).__name__}", request.url.path)


# -- ASGI wrappers -----------------------------------------------------------------------------


async def _send_problem(send: Send, status: int, title: str, detail: str, **headers: str) -> None:
    body = orjson.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail})
    raw = [(b"content-type", PROBLEM.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _host_name(scope: Scope) -> str:
    """The name the request was addressed to (its Host header, without the port)."""
    headers: dict[bytes, bytes] = dict(scope["headers"])
    return host_name(headers.get(b"host", b"").decode("latin-1"))


class Guard:
    """Outermost: latency by route template and status; for /v1 and /mcp also a bound on
    requests served at once (a bounded wait, then 503) and on body size (413).

    Without API keys, only requests addressed to a loopback name are served (421 otherwise):
    binding loopback keeps other machines out, but a web page the user opens could still
    reach the gateway through a name of its own that resolves to 127.0.0.1 (DNS rebinding),
    and then read or forget memories as a same-origin page."""

    def __init__(self, app: ASGIApp, settings: Settings, keys: KeyRing) -> None:
        self.app = app
        self.settings = settings
        self.keys = keys
        self.slots = asyncio.Semaphore(settings.gateway_max_in_flight)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.keys and not is_loopback(name := _host_name(scope)):
            detail = (
                f"the request is addressed to {name or 'no host'!r}: without API keys the "
                "gateway answers only requests addressed to localhost or a loopback address"
            )
            await _send_problem(send, 421, "Misdirected request", detail)
            return
        t0 = time.perf_counter()
        status = {"code": 500}

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        path: str = scope["path"]
        try:
            if path.startswith("/v1/") or path == "/mcp":
                await self._bounded(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "<unmatched>"
            metrics.GATEWAY_SECONDS.labels(scope["method"], route, str(status["code"])).observe(
                time.perf_counter() - t0
            )

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.settings.gateway_max_body_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _send_problem(send, 413, "Request too large", f"the body is over {limit} bytes")
            return
        try:
            async with asyncio.timeout(self.settings.gateway_queue_timeout_s):
                await self.slots.acquire()
        except TimeoutError:
            await _send_problem(
                send, 503, "Service unavailable", "too many requests in flight", retry_after="1"
            )
            return
        received = {"bytes": 0}

        async def receiving() -> MutableMapping[str, Any]:
            message = await receive()
            received["bytes"] += len(message.get("body", b""))
            if received["bytes"] > limit:  # a chunked body without a length
                raise _BodyTooLarge
            return message

        metrics.GATEWAY_IN_FLIGHT.inc()
        try:
            await self.app(scope, receiving, send)
        except _BodyTooLarge:
            await _send_problem(send, 413, "Request too large", f"the body is over {limit} bytes")
        finally:
            metrics.GATEWAY_IN_FLIGHT.dec()
            self.slots.release()


class _BodyTooLarge(Exception):
    pass


class AsgiEndpoint:
    """An ASGI app as a route's endpoint (Starlette calls a plain function with a request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class McpAuth:
    """API-key authentication of `/mcp`; the caller is left in the request's state for the
    tools, which check namespaces themselves."""

    def __init__(self, app: ASGIApp, keys: KeyRing) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal: Principal | None = Principal.local()
        if self.keys:
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
            principal = self.keys.verify(key) if key else None
        if principal is None:
            await _send_problem(
                send,
                401,
                "Unauthorized",
                "a valid API key is required",
                www_authenticate="Bearer",
            )
            return
        scope.setdefault("state", {})["lychee_principal"] = principal
        await self.app(scope, receive, send)


# -- the app -----------------------------------------------------------------------------------


def create_app(settings: Settings, keys: KeyRing, metrics_url: str | None = None) -> FastAPI:
    """The gateway; its lifespan opens the connection to the stack (one `MemoryService`: one
    client, one reply partition; made on the first call if the stack is not up yet) and the
    MCP session manager, and registers `metrics_url` when given."""
    stack = StackConnection(settings)
    mcp = build_mcp(stack.service, request_principal, settings.mcp_namespace)
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,  # any replica can serve any call: nothing to pin
        json_response=True,
        host=settings.gateway_host,  # loopback: the SDK's DNS-rebinding protection is on
    )
    mcp_endpoint = next(r for r in mcp_app.routes if isinstance(r, Route) and r.path == "/mcp")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with stack, mcp.session_manager.run():
            registration = None
            if metrics_url and settings.metrics_enabled:
                host = metrics_url.split("//", 1)[1].rsplit(":", 1)[0]
                endpoint = metrics.Endpoint("gateway", metrics_url, host, os.getpid())
                registration = metrics.register(settings, endpoint)
            try:
                yield
            finally:
                if registration is not None:
                    registration.stop()

    app = FastAPI(
        title="lychee-memory gateway",
        description="Streaming long-term memory for LLM agents, over HTTP and MCP.",
        version="1",
        lifespan=lifespan,
    )
    app.state.keys = keys
    app.state.stack = stack
    app.state.settings = settings
    app.include_router(router)
    app.include_router(views.router)
    app.include_router(dead_letters.router)
    console.mount(app)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"description": "a dependency is down"}})
    async def readyz() -> JSONResponse:
        """The broker, Redis and LanceDB answer."""
        checks = await stack.readiness()
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ok" if ok else "unavailable", "checks": checks},
            status_code=200 if ok else 503,
        )

    app.router.routes.append(Route("/metrics", endpoint=AsgiEndpoint(make_asgi_app())))
    app.router.routes.append(Route("/mcp", endpoint=McpAuth(mcp_endpoint.endpoint, keys)))
    app.add_middleware(Guard, settings=settings, keys=keys)
    return app
