"""`EdgeGuard`'s admission rules in front of a route: the key before the body, JSON bodies
only, and without keys no write that another site could make the browser send."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from streams.gateway.app import create_app
from streams.gateway.auth import ApiKey, KeyRing, digest
from streams.gateway.deps import Caller
from streams.gateway.errors import GatewayError
from streams.gateway.middleware import EdgeGuard
from streams.gateway.problems import gateway_error
from streams.settings import Settings
from tests.streams.gateway.conftest import unreachable

JSON = {"Content-Type": "application/json"}
KEY = "lyk_test"
KEYED = KeyRing((ApiKey("k", bytes.fromhex(digest(KEY)), ("*",)),))


def client(keys: KeyRing) -> TestClient:
    app = FastAPI()
    app.state.keys = keys
    app.add_exception_handler(GatewayError, gateway_error)

    @app.post("/v1/write")
    @app.delete("/v1/write")
    @app.get("/v1/write")
    async def write(principal: Caller, request: Request) -> dict[str, Any]:
        return {"caller": principal.name, "body": (await request.body()).decode()}

    app.add_middleware(EdgeGuard, settings=Settings.load(None), keys=keys)
    return TestClient(app, base_url="http://127.0.0.1:8080")


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
        ("127.0.0.1:8080", {**JSON, "Referer": "http://127.0.0.1:8080/#/forget"}),
    ],
)
def test_admission_without_keys_takes_json_from_loopback_and_its_own_pages(
    host: str, headers: dict[str, str]
) -> None:
    r = client(KeyRing()).post("/v1/write", content=b"{}", headers={**headers, "Host": host})
    assert r.status_code == 200 and r.json() == {"caller": "local", "body": "{}"}, r.text


@pytest.mark.parametrize(
    ("method", "body", "headers", "status", "says"),
    [
        ("POST", b"{}", {"Content-Type": "text/plain"}, 415, "application/json"),
        ("POST", b"{}", {"Content-Type": "application/x-www-form-urlencoded"}, 415, "json"),
        ("POST", b"{}", {}, 415, "got 'none'"),  # a beacon of an untyped blob
        ("POST", b"{}", {**JSON, "Content-Encoding": "gzip"}, 415, "'gzip' is not read"),
        ("POST", b"{}", {**JSON, "Origin": "http://127.0.0.1:9"}, 403, "127.0.0.1:9"),
        ("POST", b"{}", {**JSON, "Origin": "null"}, 403, "'null'"),  # a sandboxed frame
        ("POST", b"", {"Origin": "https://evil.example"}, 403, "evil.example"),  # flush, end
        ("DELETE", b"", {"Origin": "https://evil.example"}, 403, "evil.example"),  # forget
        ("POST", b"{}", {**JSON, "Referer": "https://evil.example/x"}, 403, "evil.example"),
        ("POST", b"{}", {**JSON, "Referer": "http://127.0.0.1:9/x"}, 403, "127.0.0.1:9"),
    ],
)
def test_admission_without_keys_refuses_what_another_site_could_send(
    method: str, body: bytes, headers: dict[str, str], status: int, says: str
) -> None:
    c = client(KeyRing())
    r = c.request(method, "/v1/write", content=body, headers={**headers, "Host": "127.0.0.1:8080"})
    assert r.status_code == status and says in r.json()["detail"], r.text
    assert r.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    ("host", "status"),
    [("rebound.example:8080", 421), ("127.0.0.1.rebound.example", 421), ("[::1", 421)],
)
def test_admission_without_keys_a_name_that_is_not_loopback_is_misdirected(
    host: str, status: int
) -> None:
    r = client(KeyRing()).post("/v1/write", content=b"{}", headers={**JSON, "Host": host})
    assert r.status_code == status and "loopback" in r.json()["detail"], r.text


def test_admission_without_keys_reads_from_anywhere_stay_reads() -> None:
    r = client(KeyRing()).get("/v1/write", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200  # the browser keeps the answer from the page (no CORS grant)


def test_admission_with_keys_wants_a_key_and_json_and_leaves_origins_to_the_key() -> None:
    c = client(KEYED)
    elsewhere = {**JSON, "Host": "memory.example.com", "Origin": "http://x"}
    r = c.post("/v1/write", content=b"{}", headers=elsewhere)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    r = c.post("/v1/write", content=b"{}", headers={**elsewhere, "X-API-Key": KEY})
    assert r.status_code == 200 and r.json()["caller"] == "k", r.text
    form = {"Content-Type": "text/plain", "Authorization": f"Bearer {KEY}"}
    assert c.post("/v1/write", content=b"{}", headers=form).status_code == 415
    wrong = {**JSON, "Authorization": "Bearer lyk_wrong"}
    assert c.post("/v1/write", content=b"not json", headers=wrong).status_code == 401


class Unread:
    """A request whose body never comes: the guard must answer without asking for it."""

    def __init__(self) -> None:
        self.asked = 0
        self.sent: list[MutableMapping[str, Any]] = []

    async def receive(self) -> MutableMapping[str, Any]:
        self.asked += 1
        raise AssertionError("the body was read")

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)


@pytest.mark.parametrize(
    "headers",
    [
        [(b"content-length", b"16777216"), (b"content-type", b"application/json")],
        [(b"content-length", b"100"), (b"authorization", b"Bearer lyk_wrong")],
        [(b"transfer-encoding", b"chunked"), (b"x-api-key", b"")],
    ],
)
async def test_admission_with_keys_refuses_a_keyless_request_without_reading_its_body(
    headers: list[tuple[bytes, bytes]],
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app was called")

    guard = EdgeGuard(app, Settings.load(None), KEYED)
    request = Unread()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/namespaces/a/exchanges",
        "headers": [(b"host", b"memory.example.com"), *headers],
    }
    await guard(scope, request.receive, request.send)
    assert request.asked == 0
    assert request.sent[0]["status"] == 401
    assert guard.slots._value == Settings.load(None).gateway.max_in_flight  # no slot taken


def test_readyz_with_keys_tells_why_a_backend_is_down_only_to_a_caller_with_a_key() -> None:
    settings = unreachable()
    with TestClient(create_app(settings, KEYED), base_url="http://memory.example.com") as c:
        anyone = c.get("/readyz")
        assert anyone.status_code == 503
        assert set(anyone.json()["checks"].values()) == {"unavailable"}
        assert settings.kafka.bootstrap.rsplit(":", 1)[1] not in anyone.text
        keyed = c.get("/readyz", headers={"Authorization": f"Bearer {KEY}"})
        assert keyed.status_code == 503 and keyed.json()["checks"]["redis"] != "unavailable"
