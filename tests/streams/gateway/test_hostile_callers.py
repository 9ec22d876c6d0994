"""Callers without a key against a real keyed gateway process (uvicorn, the real broker,
Redis and workers): refused before their bodies are read, whatever their size or speed,
while authorised adds and searches keep answering; a revoked key refused without a
restart."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from streams.gateway.auth import add_key, revoke_key
from tests.streams.gateway.conftest import Gateways
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SIXTEEN_MB = 16 * 1024 * 1024
# a body of the shape that costs the most Python objects per byte once parsed
EMPTY_EXCHANGES = b'{"exchanges":[' + b"{}," * (SIXTEEN_MB // 3 - 10) + b"{}]}"
ANSWER_WAIT_S = 60  # a bound for a hung socket, not a measurement


def head(url: str, length: int, key: str | None = None) -> bytes:
    host = urlsplit(url).netloc
    lines = [
        "POST /v1/namespaces/gw-a/exchanges HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@contextmanager
def connected(url: str) -> Iterator[socket.socket]:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=ANSWER_WAIT_S)
    try:
        yield sock
    finally:
        sock.close()


def status_of(sock: socket.socket) -> int:
    """The status of the answer on `sock` (its first line)."""
    got = b""
    while b"\r\n" not in got:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return int(got.split(b" ", 2)[1])


def peak_rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("VmHWM:")]
    return int(line.split()[1])


def test_hostile_keyless_request_that_stalls_its_body_is_refused_at_once(
    gateways: Gateways,
) -> None:
    url = gateways.urls[0]
    with connected(url) as sock:
        sock.sendall(head(url, SIXTEEN_MB) + b'{"exchanges":[')  # and then nothing more
        assert status_of(sock) == 401


def test_hostile_keyless_16mb_body_is_refused_without_the_gateway_growing(
    gateways: Gateways,
) -> None:
    url, pid = gateways.urls[0], gateways.pids[0]
    httpx.get(f"{url}/v1/whoami", headers=gateways.headers("a"), timeout=60)  # warm
    before = peak_rss_kb(pid)
    statuses: list[int] = []
    for _ in range(3):
        with connected(url) as sock:
            sender = threading.Thread(
                target=_send_quietly, args=(sock, EMPTY_EXCHANGES), daemon=True
            )
            sock.sendall(head(url, len(EMPTY_EXCHANGES)))
            sender.start()
            statuses.append(status_of(sock))
    assert statuses == [401] * 3
    grown_mb = (peak_rss_kb(pid) - before) / 1024
    assert grown_mb < 8, f"the gateway's peak memory grew by {grown_mb:.0f} MB"


def _send_quietly(sock: socket.socket, body: bytes) -> None:
    """Send as much of `body` as the server takes before it closes the connection."""
    with suppress(OSError):
        sock.sendall(body)


def test_hostile_300_stalled_keyless_uploads_leave_authorised_adds_and_searches_answering(
    gateways: Gateways,
) -> None:
    url = gateways.urls[1]
    h = gateways.headers("a")
    with ExitStack() as stack:
        socks = [stack.enter_context(connected(url)) for _ in range(300)]
        for sock in socks:
            sock.sendall(head(url, SIXTEEN_MB) + b'{"exchanges":[{},{},')  # then stall
        with httpx.Client(base_url=url, timeout=120) as c:
            body: dict[str, Any] = {
                "exchanges": [
                    {
                        "session_id": "hostile",
                        "exchange_id": "h1",
                        "turns": [
                            {"role": "user", "speaker": "Noor", "content": "I keep bees in Tartu."}
                        ],
                    }
                ]
            }
            added = c.post("/v1/namespaces/gw-a/exchanges", json=body, headers=h)
            assert added.status_code == 202, added.text
            found = c.post(
                "/v1/namespaces/gw-a/search",
                json={  # its own session: the namespace holds other tests' facts about Noor
                    "query": "Where does Noor keep bees?",
                    "k": 3,
                    "session_id": "hostile",
                    "wait_for": added.json(),
                },
                headers=h,
            )
            assert found.status_code == 200, found.text
            assert any("Tartu" in e["text"] for e in found.json()["evidence"])
        assert [status_of(sock) for sock in socks] == [401] * 300


def test_hostile_revoked_key_is_refused_by_a_running_gateway_without_a_restart(
    gateways: Gateways,
) -> None:
    keys_file = Path(gateways.env["LYCHEE_API_KEYS_FILE"])
    name = f"temp-{uuid.uuid4().hex[:8]}"
    key = add_key(keys_file, name, ["gw-a"])
    url = f"{gateways.urls[0]}/v1/whoami"

    def answer() -> int:
        return httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=60).status_code

    wait_until(
        answer,
        what="the added key taken up",
        until=lambda s: s == 200,
        timeout_s=30,
        interval_s=0.2,
    )
    revoke_key(keys_file, name)
    wait_until(
        answer,
        what="the revoked key refused",
        until=lambda s: s == 401,
        timeout_s=30,
        interval_s=0.2,
    )
