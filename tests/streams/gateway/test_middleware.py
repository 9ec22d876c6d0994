"""The gateway's outer ASGI layer: a bound on requests in flight and on body size."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.exceptions import HTTPException as StarletteHTTPException

from streams.gateway.auth import KeyRing, add_key
from streams.gateway.middleware import EdgeGuard
from streams.gateway.problems import http_error
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


JSON = {"Content-Type": "application/json"}


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
        r = await c.post("/v1/namespaces/a/exchanges", content=b"x" * 2048, headers=JSON)
        assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(4):
                yield b"x" * 512

        r = await c.post("/v1/namespaces/a/exchanges", content=chunks(), headers=JSON)
        assert r.status_code == 413
        r = await c.post("/v1/namespaces/a/exchanges", content=b"x" * 100, headers=JSON)
        assert r.status_code == 200


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


async def test_edge_guard_body_that_stops_arriving_is_408_and_frees_its_slot() -> None:
    guard = EdgeGuard(Slow(0), settings(max_in_flight=1, body_timeout_s=0.2), KeyRing())
    sent: list[Any] = []
    stalled = asyncio.Event()  # never set: the rest of the body never comes

    async def receive() -> dict[str, Any]:
        if not sent and not stalled.is_set() and not getattr(receive, "first", False):
            receive.first = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b'{"exchanges": [', "more_body": True}
        await stalled.wait()
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/namespaces/a/exchanges",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
    }
    await guard(scope, receive, send)
    assert sent[0]["status"] == 408 and b"did not arrive within 0.2 s" in sent[1]["body"]
    assert guard.slots._value == 1  # the slot is back
    async with client(guard) as c:
        assert (await c.post("/v1/x", json={})).status_code == 200


def test_edge_guard_chunked_body_over_the_limit_is_413_through_fastapi() -> None:
    """FastAPI answers any failure to read a body with 400; the guard's refusal passes."""
    app = FastAPI()
    app.add_exception_handler(StarletteHTTPException, http_error)

    @app.post("/v1/namespaces/{namespace}/exchanges")
    async def add(body: dict[str, Any]) -> dict[str, Any]:
        return body

    app.add_middleware(EdgeGuard, settings=settings(max_body_bytes=1024), keys=KeyRing())

    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"x": "'
        for _ in range(4):
            yield b"x" * 512
        yield b'"}'

    with TestClient(app, base_url="http://127.0.0.1") as c:
        r = c.post("/v1/namespaces/a/exchanges", content=chunks(), headers=JSON)
    assert r.status_code == 413, r.text
    assert r.json()["title"] == "Request too large" and "over 1024 bytes" in r.json()["detail"]
