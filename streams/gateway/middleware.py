"""The ASGI layers around the app, and an ASGI app as a route's endpoint.

`EdgeGuard` wraps everything, so it refuses before routing what no route should see (without
API keys, a request addressed to a name that is not loopback; on /v1 and /mcp, too many
requests at once or a body too large), answering with problem details written here, and it
times every request by route. `McpAuth` authenticates `/mcp`, an ASGI app mounted outside
FastAPI's dependencies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from streams import metrics
from streams.gateway.auth import KeyRing, Principal, host_name, is_loopback, presented_key
from streams.gateway.problems import PROBLEM
from streams.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


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


class EdgeGuard:
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
        self.slots = asyncio.Semaphore(settings.gateway.max_in_flight)

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
        limit = self.settings.gateway.max_body_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _send_problem(send, 413, "Request too large", f"the body is over {limit} bytes")
            return
        try:
            async with asyncio.timeout(self.settings.gateway.queue_timeout_s):
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
