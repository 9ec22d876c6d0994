"""Binding and serving the gateway with uvicorn.

Without API keys anyone who can reach the port can read and write every namespace, so the
gateway then refuses any address but loopback.
"""

from __future__ import annotations

import socket

import structlog
import uvicorn

from streams.gateway.auth import Keys, is_loopback
from streams.gateway.errors import GatewayConfigError
from streams.metrics import advertised_host
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway")


def check_binding(host: str, keys: Keys) -> str | None:
    """Refuse a non-loopback address without keys; the warning to show for no keys."""
    if keys:
        return None
    if not is_loopback(host):
        raise GatewayConfigError(
            f"refusing to listen on {host} without API keys: anyone reaching it could read and "
            "write every namespace. Set LYCHEE_API_KEYS_FILE (create keys with `lychee gateway "
            "keys add NAME --namespace NS`) or listen on 127.0.0.1."
        )
    return (
        "no API keys configured (LYCHEE_API_KEYS_FILE is unset): every local caller may use "
        f"every namespace; listening on loopback ({host}) only"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), so that the real port is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise GatewayConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    return sock


def serve(settings: Settings, sock: socket.socket, keys: Keys) -> None:
    from streams import tracing
    from streams.gateway.app import create_app

    tracing.setup("gateway")  # before the app: its requests are traced (OTEL_* environment)

    host, port = sock.getsockname()[:2]
    url = f"http://{advertised_host(host)}:{port}/metrics"
    app = create_app(settings, keys, metrics_url=url)
    config = uvicorn.Config(
        app,
        log_config=None,  # our structlog set-up
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        proxy_headers=True,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        tracing.shutdown()  # what the batch exporter still holds
