"""Binding and serving the gateway with uvicorn.

Without API keys anyone who can reach the port can read and write every namespace, so the
gateway then refuses any address but loopback. Whoever reaches the port can open
connections: each must send its request's headers within `header_timeout_s`, and at most
`CONNECTIONS_PER_SLOT` connections per in-flight slot are open at once, a new one taking the
place of the one that has waited longest for its headers.
"""

from __future__ import annotations

import asyncio
import socket
from typing import ClassVar

import h11
import structlog
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from streams.gateway.auth import Keys, is_loopback
from streams.gateway.errors import GatewayConfigError
from streams.metrics import advertised_host
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway")

# connections per request served at once: room for keep-alive clients and those waiting in
# the queue, not for a peer's thousands of idle sockets
CONNECTIONS_PER_SLOT = 4


class HeaderDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on request headers, which uvicorn lacks
    (its keep-alive timer ends at a request's first byte, and nothing times a connection
    before its first request): a connection that has not completed its headers
    `header_timeout_s` after it opened, or after its previous answer, is closed, whether it
    sends nothing or one byte at a time. A connection over uvicorn's `limit_concurrency`
    takes the place of the one that has waited longest for its headers, or is closed at once
    when every one is being answered: peers that open connections and send nothing (no key
    is read before the headers) hold no place a prompt request needs."""

    header_timeout_s: ClassVar[float] = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.config.limit_concurrency
        # uvicorn answers 503 while `limit` connections are open, this one among them
        crowded = limit is not None and len(self.connections) >= limit
        if crowded and not self._made_room() and len(self.connections) > (limit or 0):
            transport.close()
            return
        self._arm_header_timer()

    def _made_room(self) -> bool:
        """Close the connection that has waited longest for its headers; False when none
        waits (a closed one leaves `connections` only when its loss is handled)."""
        waiting = [
            (c._header_timer.when(), c)
            for c in self.connections
            if isinstance(c, HeaderDeadline) and c._header_timer is not None
        ]
        if not waiting:
            return False
        _, oldest = min(waiting, key=lambda found: found[0])
        oldest._disarm_header_timer()
        oldest.transport.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # its headers are in (or it was refused)
            self._disarm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_header_timer()  # the next request's headers have the same bound

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol(header_timeout_s: float) -> type[H11Protocol]:
    """`HeaderDeadline` with this deadline (uvicorn builds protocols from a class)."""
    return type("GatewayProtocol", (HeaderDeadline,), {"header_timeout_s": header_timeout_s})


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
    gateway = settings.gateway
    config = uvicorn.Config(
        app,
        http=protocol(gateway.header_timeout_s),
        limit_concurrency=gateway.max_in_flight * CONNECTIONS_PER_SLOT,
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
