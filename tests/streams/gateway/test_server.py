"""A real gateway process (uvicorn) against sockets that never finish their headers: one that
sends nothing and one that sends a byte at a time are closed once the header deadline
passes, before a first request or after an answer; a connection over the bound takes the
place of the one that has waited longest for its headers; a normal request is served all
along. No key is needed to try, so none is set."""

from __future__ import annotations

import select
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing

import httpx
import pytest

from streams.stack.embedded import Child, free_port
from tests.streams.gateway.conftest import LateStack, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HEADER_TIMEOUT_S = 2.0
MARGIN_S = 3.0  # a loaded machine's scheduling, not a measurement
MAX_CONNECTIONS = 4  # one slot in flight, four connections per slot
STARTED = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@pytest.fixture
def gateway(late_stack: LateStack) -> Iterator[tuple[str, int]]:
    """A gateway without keys on loopback; its stack is not up (no route here needs it)."""
    port = free_port()
    env = {
        **late_stack.env(),
        "LYCHEE_GATEWAY_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "LYCHEE_GATEWAY_MAX_IN_FLIGHT": "1",
        "LYCHEE_LOG_LEVEL": "WARNING",
    }
    argv = [sys.executable, "-m", "streams.cli", "gateway", "--host", "127.0.0.1"]
    log = late_stack.stack.data_dir.parent / "gateway.log"
    child = Child("gateway", [*argv, "--port", str(port)], log, env)
    child.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}", child, timeout_s=300, path="/healthz")
        yield "127.0.0.1", port
    finally:
        child.stop()


def closed_within(sock: socket.socket, limit_s: float, dribble: bool = False) -> float | None:
    """Seconds until the gateway closes `sock` (None: still open after `limit_s`), sending
    one more header byte every 0.25 s when `dribble`."""
    t0 = time.monotonic()
    while (elapsed := time.monotonic() - t0) < limit_s:
        try:
            if dribble:
                sock.send(b"a")
            readable, _, _ = select.select([sock], [], [], 0.25)
            if readable:
                got = sock.recv(4096)
                assert got == b"", f"an answer to unfinished headers: {got[:200]!r}"
                return elapsed
        except (BrokenPipeError, ConnectionResetError):
            return elapsed
    return None


def healthz_answer(sock: socket.socket) -> bytes:
    """The whole answer to a `GET /healthz` on `sock` (its body is `{"status":"ok"}`)."""
    got = b""
    while not got.endswith(b'{"status":"ok"}'):
        chunk = sock.recv(4096)
        assert chunk, f"closed before the answer: {got!r}"
        got += chunk
    return got


def healthz(address: tuple[str, int]) -> int:
    return httpx.get(f"http://{address[0]}:{address[1]}/healthz", timeout=30).status_code


def test_gateway_closes_connections_that_do_not_finish_their_headers(
    gateway: tuple[str, int],
) -> None:
    limit = HEADER_TIMEOUT_S + MARGIN_S
    with closing(socket.create_connection(gateway)) as idle:
        waited = closed_within(idle, limit)
    assert waited is not None and waited >= HEADER_TIMEOUT_S - 0.5, waited
    with closing(socket.create_connection(gateway)) as slow:
        slow.sendall(STARTED)
        waited = closed_within(slow, limit, dribble=True)
    assert waited is not None and waited >= HEADER_TIMEOUT_S - 0.5, waited
    with closing(socket.create_connection(gateway, timeout=30)) as kept:  # after a first answer
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert healthz_answer(kept).startswith(b"HTTP/1.1 200")
        kept.sendall(STARTED)
        assert closed_within(kept, limit, dribble=True) is not None
    assert healthz(gateway) == 200


def test_gateway_serves_headers_that_arrive_in_pieces_within_the_deadline(
    gateway: tuple[str, int],
) -> None:
    with closing(socket.create_connection(gateway, timeout=30)) as sock:
        sock.sendall(STARTED)
        time.sleep(HEADER_TIMEOUT_S / 2)
        sock.sendall(b"a\r\n\r\n")
        assert healthz_answer(sock).startswith(b"HTTP/1.1 200")


def test_a_request_over_the_bound_takes_the_place_of_a_connection_that_sends_nothing(
    gateway: tuple[str, int],
) -> None:
    """Peers holding every place with connections that send nothing (no key is read before
    the headers) do not shut out a caller who sends a request: the one that has waited
    longest for its headers makes room, before its deadline."""
    with ExitStack() as held:
        idle = [
            held.enter_context(closing(socket.create_connection(gateway)))
            for _ in range(MAX_CONNECTIONS)
        ]
        time.sleep(0.3)  # the gateway has accepted them
        for _ in range(3):
            assert healthz(gateway) == 200
        assert closed_within(idle[0], HEADER_TIMEOUT_S / 2) is not None, "the oldest kept"
