"""The console at `/`: static files (plain ES modules and CSS, no build step, nothing from
the network) that call the gateway's own `/v1` routes with the caller's key.

Memory text is untrusted: the scripts build the page with DOM nodes and `textContent` only,
and every console response carries a Content-Security-Policy that allows no inline script,
no inline style, no plugin, no frame and no connection but to this origin.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]

Scope = MutableMapping[str, Any]


class _Hardened:
    """The static files, each response with the console's security headers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_RAW_HEADERS]
            await send(message)

        await self.app(scope, receive, sending)


def mount(app: FastAPI) -> None:
    """Serve the console at `/` and its files under `/console/`."""

    @app.get("/", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=HEADERS)

    app.mount("/console", _Hardened(StaticFiles(directory=STATIC)), name="console")
