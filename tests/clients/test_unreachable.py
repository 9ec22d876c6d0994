"""A gateway that cannot be reached, or that takes a request and never answers: the error
says which, and names the gateway's address."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from lychee_client import (
    NO_RETRY,
    AsyncLycheeClient,
    GatewayTimedOut,
    GatewayUnreachable,
    LycheeClient,
)
from streams.stack.embedded import free_port


@pytest.fixture
def silent() -> Iterator[str]:
    """An HTTP address that accepts connections and reads requests but never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


def test_a_refused_connection_names_the_gateway() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with (
        LycheeClient(url, "ns", retry=NO_RETRY) as client,
        pytest.raises(GatewayUnreachable) as raised,
    ):
        client.search("anything")
    assert not isinstance(raised.value, GatewayTimedOut)
    assert str(raised.value).startswith(f"POST {url}/v1/namespaces/ns/search: ConnectError")


def test_a_request_sent_and_not_answered_is_a_timeout(silent: str) -> None:
    with (
        LycheeClient(silent, "ns", timeout_s=0.5) as client,
        pytest.raises(GatewayTimedOut) as raised,
    ):
        client.search("anything")
    assert str(raised.value) == (
        f"POST {silent}/v1/namespaces/ns/search: sent, no answer within the client's timeout"
    )
    assert isinstance(raised.value, TimeoutError)  # and a GatewayUnreachable, for old callers


async def test_the_async_client_tells_the_same(silent: str) -> None:
    async with AsyncLycheeClient(silent, "ns", timeout_s=0.5) as client:
        with pytest.raises(GatewayTimedOut):
            await client.search("anything")
