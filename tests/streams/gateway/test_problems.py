"""A body the gateway cannot read is answered with what is wrong with it, in the one problem
shape, before any backend is asked (the stack here is not running)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from streams.gateway.app import create_app
from streams.gateway.auth import ApiKey, KeyRing, digest
from streams.gateway.problems import PROBLEM
from tests.streams.gateway.conftest import unreachable

SEARCH = "/v1/namespaces/ns1/search"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(unreachable(), KeyRing()), base_url="http://127.0.0.1:8080") as c:
        yield c


def test_problems_a_body_that_is_not_json_names_the_body_and_where_it_breaks(
    client: TestClient,
) -> None:
    r = client.post(SEARCH, content=b'{"query": "x", "k": 3', headers=JSON)
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    [error] = r.json()["errors"]
    assert error["field"] == "body"
    assert error["message"] == "not valid JSON at character 21: Expecting ',' delimiter"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"query": "\xff"}', "the body is not UTF-8: invalid start byte at byte 11"),
        (b"[" * 100_000 + b"]" * 100_000, "the body's JSON nests too deeply to be read"),
        (
            b'{"query": "x", "k": ' + b"9" * 5000 + b"}",
            "the body holds a number far larger than any field takes (over 4,300 digits)",
        ),
    ],
)
def test_problems_a_body_that_cannot_be_decoded_says_why(
    client: TestClient, body: bytes, detail: str
) -> None:
    r = client.post(SEARCH, content=body, headers=JSON)
    assert r.status_code == 400 and r.headers["content-type"] == PROBLEM
    assert r.json()["detail"] == detail


@pytest.mark.parametrize(
    ("path", "unknown", "reads"),
    [
        ("/v1/namespaces/ns1/records?page_sise=5", "page_sise", "memory_type, page, page_size"),
        ("/v1/namespaces/ns1/sessions/s1/timeline?turn=t1", "turn", "page, page_size, turn_id"),
        ("/v1/dead-letters?topic=memory.turns&reason=x", "reason", "error_type, since, topic"),
        ("/v1/namespaces/ns1/search?k=3", "k", "none"),
    ],
)
def test_problems_a_query_parameter_no_route_reads_is_named(
    client: TestClient, path: str, unknown: str, reads: str
) -> None:
    """A misspelt parameter is refused as an unknown body field is, not served the default."""
    r = client.request("POST" if path.endswith("k=3") else "GET", path, json={"query": "x"})
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, r.text
    [error] = r.json()["errors"]
    assert error["field"] == unknown
    assert f"unknown query parameter {unknown!r}" in r.json()["detail"]
    assert reads in r.json()["detail"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/namespaces/other/records?page_sise=5", 403),  # another namespace's: 403 first
        ("/v1/dead-letters?reason=x", 403),  # a stack-wide route: 403 first
        ("/v1/namespaces/ns1/records?page_sise=5", 422),
    ],
)
def test_problems_a_caller_the_route_refuses_hears_that_before_its_parameters(
    path: str, status: int
) -> None:
    ring = KeyRing((ApiKey("k", bytes.fromhex(digest("lyk_ns1")), ("ns1",)),))
    with TestClient(create_app(unreachable(), ring), base_url="http://memory.example.com") as c:
        r = c.get(path, headers={"Authorization": "Bearer lyk_ns1"})
    assert r.status_code == status, r.text


def test_problems_the_parameters_a_route_reads_pass() -> None:
    """Past the check, a route's own parameters reach the service: 503, the stack is down."""
    with TestClient(create_app(unreachable(), KeyRing()), base_url="http://127.0.0.1:8080") as c:
        r = c.get("/v1/namespaces/ns1/records?page=2&page_size=5&turns=true")
    assert r.status_code == 503, r.text


def test_problems_a_500_closes_its_connection_so_the_next_request_is_answered() -> None:
    """uvicorn drops a connection whose handler raised; a client that kept it met a reset."""
    import threading

    import httpx
    import uvicorn
    from fastapi import FastAPI

    from streams.gateway.problems import unexpected_error
    from streams.stack.embedded import free_port

    app = FastAPI()
    app.add_exception_handler(Exception, unexpected_error)

    @app.get("/broken")
    async def broken() -> None:
        raise RuntimeError("a bug")

    @app.get("/fine")
    async def fine() -> dict[str, bool]:
        return {"ok": True}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(200):
                if server.started:
                    break
                threading.Event().wait(0.05)
            r = http.get("/broken")
            assert (r.status_code, r.headers["connection"]) == (500, "close")
            assert r.json()["detail"] == "RuntimeError"
            assert http.get("/fine").json() == {"ok": True}
    finally:
        server.should_exit = True
        thread.join(timeout=10)
