"""The gateway's outer ASGI layer: a bound on requests in flight and on body size."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from streams.gateway.auth import KeyRing, add_key
from streams.gateway.middleware import EdgeGuard
from streams.settings import Settings


def settings(**gateway: Any) -> Settings:
    return Settings.load(None, gateway=gateway)


class Slow:
    """A downstream app that reads the body and answers after a while."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await asyncio.sleep(self.delay_s)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
    )


async def test_edge_guard_full_slots_answer_503_after_the_queue_wait() -> None:
    guard = EdgeGuard(Slow(0.5), settings(max_in_flight=1, queue_timeout_s=0.1), KeyRing())
    async with client(guard) as c:
        first, second = await asyncio.gather(
            c.post("/v1/namespaces/a/search", json={}),
            c.post("/v1/namespaces/a/search", json={}),
        )
    assert sorted([first.status_code, second.status_code]) == [200, 503]
    busy = first if first.status_code == 503 else second
    assert busy.headers["content-type"] == "application/problem+json"
    assert busy.headers["retry-after"] == "1" and busy.json()["status"] == 503


async def test_edge_guard_waiting_request_gets_the_slot_when_it_frees() -> None:
    guard = EdgeGuard(Slow(0.1), settings(max_in_flight=1, queue_timeout_s=5), KeyRing())
    async with client(guard) as c:
        got = await asyncio.gather(*(c.post("/v1/x", json={}) for _ in range(4)))
    assert [r.status_code for r in got] == [200] * 4


async def test_edge_guard_body_over_the_limit_is_413_with_or_without_a_length() -> None:
    guard = EdgeGuard(Slow(0), settings(max_body_bytes=1024), KeyRing())
    async with client(guard) as c:
        r = await c.post("/v1/namespaces/a/exchanges", content=b"x" * 2048)
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(4):
                yield b"x" * 512

        r = await c.post("/v1/namespaces/a/exchanges", content=chunks())
        assert r.status_code == 413
        assert (await c.post("/v1/namespaces/a/exchanges", content=b"x" * 100)).status_code == 200


async def test_edge_guard_health_and_metrics_are_not_queued() -> None:
    guard = EdgeGuard(Slow(0.3), settings(max_in_flight=1, queue_timeout_s=0.05), KeyRing())
    async with client(guard) as c:
        got = await asyncio.gather(c.get("/healthz"), c.get("/metrics"), c.get("/readyz"))
    assert [r.status_code for r in got] == [200, 200, 200]


async def test_edge_guard_without_keys_answers_only_requests_addressed_to_loopback() -> None:
    guard = EdgeGuard(Slow(0), settings(), KeyRing())
    async with client(guard) as c:
        for host in ("127.0.0.1:8080", "localhost", "[::1]:8080"):
            assert (await c.get("/v1/x", headers={"host": host})).status_code == 200, host
        for host in ("rebound.example:8080", "", "[::1"):
            r = await c.get("/v1/x", headers={"host": host})
            assert r.status_code == 421, host
            assert "loopback" in r.json()["detail"]


async def test_edge_guard_with_keys_leaves_the_host_to_the_keys(tmp_path: Any) -> None:
    add_key(tmp_path / "keys.json", "k", ["*"])
    keys = KeyRing.load(tmp_path / "keys.json")
    guard = EdgeGuard(Slow(0), settings(), keys)
    async with client(guard) as c:
        assert (await c.get("/", headers={"host": "memory.internal"})).status_code == 200
