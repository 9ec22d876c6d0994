"""The ASGI layers around the app, and an ASGI app as a route's endpoint.

`EdgeGuard` wraps everything, so it refuses before routing what no route should see (without
API keys, a request addressed to a name that is not loopback; on /v1 and /mcp, a caller
without a valid key, a body that is not JSON or too large or too slow, a write from another
site without keys, too many requests at once), answering with problem details written here,
and it times every request by route. `McpAuth` hands the caller to `/mcp`, an ASGI app
mounted outside FastAPI's dependencies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException as StarletteHTTPException

from streams import metrics
from streams.gateway.admission import (
    PRINCIPAL,
    Headers,
    Refusal,
    authenticate,
    body_problem,
    cross_site,
)
from streams.gateway.auth import Keys, host_name, is_loopback
from streams.gateway.problems import PROBLEM
from streams.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


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
    """Outermost: latency by route template and status; for /v1 and /mcp, before the body is
    read, the rules of `admission` (the key, 401; a JSON body, 415; its declared length, 413;
    without keys, the origin of a write, 403); then a bound on requests served at once (a
    bounded wait, then 503), on the body's size as it arrives (413) and on the time it takes
    to arrive (408).

    Without API keys, only requests addressed to a loopback name are served (421 otherwise):
    binding loopback keeps other machines out, but a web page the user opens could still
    reach the gateway through a name of its own that resolves to 127.0.0.1 (DNS rebinding),
    and then read or forget memories as a same-origin page."""

    def __init__(self, app: ASGIApp, settings: Settings, keys: Keys) -> None:
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
                await self._admitted(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or "<unmatched>"
            # a label takes only known values: a caller's made-up method would be a new series
            method = scope["method"] if scope["method"] in _METHODS else "other"
            metrics.GATEWAY_SECONDS.labels(method, route, str(status["code"])).observe(
                time.perf_counter() - t0
            )

    async def _admitted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The admission rules on the headers, then a slot; the body is not read before."""
        headers = Headers(scope["headers"])
        path: str = scope["path"]
        principal = authenticate(headers, self.keys)
        refusal = (
            principal
            if isinstance(principal, Refusal)
            else body_problem(headers, self.settings.gateway.max_body_bytes)
            or (None if self.keys else cross_site(headers, scope["method"], path == "/mcp"))
        )
        if refusal is not None:
            await _send_problem(
                send, refusal.status, refusal.title, refusal.detail, **refusal.headers
            )
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        try:
            async with asyncio.timeout(self.settings.gateway.queue_timeout_s):
                await self.slots.acquire()
        except TimeoutError:
            await _send_problem(
                send, 503, "Service unavailable", "too many requests in flight", retry_after="1"
            )
            return
        metrics.GATEWAY_IN_FLIGHT.inc()
        try:
            await self._served(scope, receive, send)
        finally:
            metrics.GATEWAY_IN_FLIGHT.dec()
            self.slots.release()

    async def _served(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = BoundedBody(
            receive, self.settings.gateway.max_body_bytes, self.settings.gateway.body_timeout_s
        )
        started = {"response": False}

        async def sending(message: MutableMapping[str, Any]) -> None:
            started["response"] = True
            await send(message)

        try:
            await self.app(scope, body.receive, sending)
        except BodyRefused as exc:  # an app that let the refusal through unanswered
            if started["response"]:
                raise
            await _send_problem(send, exc.status_code, exc.title, exc.detail)


class BodyRefused(StarletteHTTPException):
    """The body grew over the limit or stopped arriving in time. An HTTP exception, so that
    FastAPI, which answers any other error of a body read with 400, passes it on to the
    problem handlers."""

    title = "Bad request"

    def __init__(self, status: int, title: str, detail: str) -> None:
        super().__init__(status, detail)
        self.title = title


class BoundedBody:
    """The request's `receive`, refusing a body over `limit` bytes (a chunked one has no
    declared length) or one that has not fully arrived `timeout_s` after the request was
    admitted: a slow upload gives its slot back."""

    def __init__(self, receive: Receive, limit: int, timeout_s: float) -> None:
        self._receive = receive
        self.limit = limit
        self.timeout_s = timeout_s
        self.deadline = asyncio.get_running_loop().time() + timeout_s
        self.received = 0
        self.complete = False

    async def receive(self) -> MutableMapping[str, Any]:
        if self.complete:  # after the body: waits for a disconnect, which has no deadline
            return await self._receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            raise BodyRefused(
                408, "Request timeout", f"the body did not arrive within {self.timeout_s:g} s"
            ) from None
        if message["type"] != "http.request":
            return message
        self.received += len(message.get("body", b""))
        if self.received > self.limit:
            raise BodyRefused(413, "Request too large", f"the body is over {self.limit} bytes")
        self.complete = not message.get("more_body", False)
        return message


class AsgiEndpoint:
    """An ASGI app as a route's endpoint (Starlette calls a plain function with a request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class McpAuth:
    """The caller of `/mcp`, as `EdgeGuard` authenticated it, left in the request's state for
    the tools, which check namespaces themselves; a 401 when it is missing (an app without
    the guard)."""

    def __init__(self, app: ASGIApp, keys: Keys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.setdefault("state", {})
        if PRINCIPAL not in state:
            found = authenticate(Headers(scope["headers"]), self.keys)
            if isinstance(found, Refusal):
                await _send_problem(send, found.status, found.title, found.detail, **found.headers)
                return
            state[PRINCIPAL] = found
        await self.app(scope, receive, send)
