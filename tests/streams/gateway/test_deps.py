"""`SameOriginJson` behind the gateway's `EdgeGuard`: a write that another site could make the
browser send is refused."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from streams.gateway.auth import ApiKey, KeyRing
from streams.gateway.deps import SameOriginJson
from streams.gateway.errors import GatewayError
from streams.gateway.middleware import EdgeGuard
from streams.gateway.problems import gateway_error
from streams.settings import Settings

JSON = {"Content-Type": "application/json"}


def client(keys: KeyRing) -> TestClient:
    app = FastAPI()
    app.state.keys = keys
    app.add_exception_handler(GatewayError, gateway_error)

    @app.post("/v1/write")
    async def write(_: SameOriginJson) -> dict[str, bool]:
        return {"ok": True}

    app.add_middleware(EdgeGuard, settings=Settings.load(None), keys=keys)
    return TestClient(app)


@pytest.mark.parametrize(
    ("host", "headers"),
    [
        ("127.0.0.1:8080", JSON),  # a client that is not a browser sends no Origin
        ("127.0.0.1:8080", {**JSON, "Origin": "http://127.0.0.1:8080"}),  # the console itself
        (
            "localhost:8080",
            {"Content-Type": "application/json; charset=utf-8", "Origin": "http://localhost:8080"},
        ),
        ("[::1]:8080", {**JSON, "Origin": "http://[::1]:8080"}),
    ],
)
def test_same_origin_json_without_keys_takes_json_from_loopback_and_its_own_pages(
    host: str, headers: dict[str, str]
) -> None:
    r = client(KeyRing()).post("/v1/write", content=b"{}", headers={**headers, "Host": host})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("host", "headers", "status", "says"),
    [
        ("127.0.0.1:8080", {"Content-Type": "text/plain"}, 415, "application/json"),
        ("127.0.0.1:8080", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "json"),
        ("127.0.0.1:8080", {}, 415, "got 'none'"),  # a beacon of an untyped blob
        ("127.0.0.1:8080", {**JSON, "Origin": "http://127.0.0.1:9"}, 403, "127.0.0.1:9"),
        ("127.0.0.1:8080", {**JSON, "Origin": "null"}, 403, "'null'"),  # a sandboxed frame
        ("rebound.example:8080", JSON, 421, "loopback"),  # DNS rebinding: the EdgeGuard refuses
        ("127.0.0.1.rebound.example", JSON, 421, "loopback"),
        ("[::1", JSON, 421, "loopback"),
    ],
)
def test_same_origin_json_without_keys_refuses_what_another_site_could_send(
    host: str, headers: dict[str, str], status: int, says: str
) -> None:
    r = client(KeyRing()).post("/v1/write", content=b"{}", headers={**headers, "Host": host})
    assert r.status_code == status and says in r.json()["detail"], r.text


def test_same_origin_json_with_keys_wants_json_and_leaves_origins_to_the_key() -> None:
    c = client(KeyRing((ApiKey("k", bytes(32), ("*",)),)))
    elsewhere = {**JSON, "Host": "memory.example.com", "Origin": "http://x"}
    assert c.post("/v1/write", content=b"{}", headers=elsewhere).status_code == 200
    form = {"Content-Type": "text/plain"}
    assert c.post("/v1/write", content=b"{}", headers=form).status_code == 415
