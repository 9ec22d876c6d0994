"""The HTTP gateway: REST routes over the same topics as every other client, MCP at /mcp, and
the console at / over the same routes.

`create_app` puts the pieces together: the routes (`routes`, `views`, `dead_letters`), the
console, the problem handlers (`problems`), `/metrics`, `/mcp` behind `McpAuth`, and
`EdgeGuard` outermost (`middleware`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import make_asgi_app
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from streams import metrics, tracing
from streams.gateway import console, dead_letters, views
from streams.gateway.admission import Headers, Refusal, authenticate
from streams.gateway.auth import Keys
from streams.gateway.connection import StackConnection
from streams.gateway.errors import GatewayError
from streams.gateway.mcp import build_mcp, http_app, request_principal
from streams.gateway.middleware import AsgiEndpoint, EdgeGuard, McpAuth
from streams.gateway.problems import gateway_error, http_error, invalid_request, unexpected_error
from streams.gateway.routes import router
from streams.settings import Settings


def create_app(settings: Settings, keys: Keys, metrics_url: str | None = None) -> FastAPI:
    """The gateway; its lifespan opens the connection to the stack (one `MemoryService`: one
    client, one reply partition; made on the first call if the stack is not up yet) and the
    MCP session manager, and registers `metrics_url` when given."""
    stack = StackConnection(settings)
    mcp = build_mcp(stack.service, request_principal, settings.gateway.mcp_namespace)
    mcp_app = http_app(mcp, settings.gateway.max_body_bytes)  # EdgeGuard's rules, not the SDK's
    mcp_endpoint = next(r for r in mcp_app.routes if isinstance(r, Route) and r.path == "/mcp")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with stack, mcp.session_manager.run():
            registration = None
            if metrics_url and settings.observability.metrics_enabled:
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
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"description": "a dependency is down"}})
    async def readyz(request: Request) -> JSONResponse:
        """The broker, Redis and LanceDB answer. Why one does not (its address, the error)
        is for a caller with a valid key, or any caller without keys (loopback only)."""
        checks = await stack.readiness()
        ok = all(v == "ok" for v in checks.values())
        if isinstance(authenticate(Headers(request.headers.raw), keys), Refusal):
            checks = {name: "ok" if v == "ok" else "unavailable" for name, v in checks.items()}
        return JSONResponse(
            {"status": "ok" if ok else "unavailable", "checks": checks},
            status_code=200 if ok else 503,
        )

    app.router.routes.append(Route("/metrics", endpoint=AsgiEndpoint(make_asgi_app())))
    app.router.routes.append(Route("/mcp", endpoint=McpAuth(mcp_endpoint.endpoint, keys)))
    app.add_middleware(EdgeGuard, settings=settings, keys=keys)
    tracing.instrument_gateway(app)  # outermost: a request refused at the edge is traced too
    return app
