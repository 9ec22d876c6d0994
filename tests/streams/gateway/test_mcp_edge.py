"""`/mcp` at the gateway's edge takes the REST routes' rules, not the MCP SDK's own: with keys,
the Host and Origin of a reverse proxy the key vouches for and bodies up to the gateway's
limit; without keys, the same refusals of another name or another site as REST (the stack
here is not running: nothing below needs it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from streams.gateway.app import create_app
from streams.gateway.auth import ApiKey, KeyRing, digest
from streams.gateway.problems import PROBLEM
from tests.streams.gateway.conftest import unreachable

KEY = "lyk_edge"
KEYED = KeyRing((ApiKey("k", bytes.fromhex(digest(KEY)), ("*",)),))
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "edge-test", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def keyed() -> Iterator[TestClient]:
    """A keyed gateway reached through a proxy that keeps the public Host."""
    app = create_app(unreachable(), KEYED)
    with TestClient(app, base_url="https://memory.example.com") as c:
        c.headers.update({**MCP_HEADERS, "Authorization": f"Bearer {KEY}"})
        yield c


@pytest.fixture(scope="module")
def keyless() -> Iterator[TestClient]:
    with TestClient(create_app(unreachable(), KeyRing()), base_url="http://127.0.0.1:8080") as c:
        c.headers.update(MCP_HEADERS)
        yield c


def test_mcp_with_keys_serves_a_reverse_proxys_host_and_origin(keyed: TestClient) -> None:
    for headers in ({}, {"Origin": "https://memory.example.com"}):
        r = keyed.post("/mcp", json=INITIALIZE, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["result"]["serverInfo"]["name"] == "lychee-memory"
    rest = keyed.get("/v1/whoami")  # what REST answers the same caller
    assert rest.status_code == 200


def test_mcp_body_limit_is_the_gateways_not_the_sdks(keyed: TestClient) -> None:
    """Over the SDK's 4 MiB default and under LYCHEE_GATEWAY_MAX_BODY_BYTES: the tool
    answers (its own argument limit); over the gateway's limit: its 413 problem."""
    call: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "add_memory", "arguments": {"content": "x" * (6 * 1024 * 1024)}},
    }
    r = keyed.post("/mcp", json=call)
    assert r.status_code == 200, r.text[:300]
    result = r.json()["result"]
    assert result["isError"] and "content" in result["content"][0]["text"]
    limit = unreachable().gateway.max_body_bytes
    big = keyed.post("/mcp", content=b" " * (limit + 1))
    assert big.status_code == 413 and big.headers["content-type"] == PROBLEM


def test_mcp_without_keys_serves_loopback_names_refuses_others(keyless: TestClient) -> None:
    for host in ("localhost", "127.0.0.1:8080", "[::1]:8080"):  # what REST serves
        r = keyless.post("/mcp", json=INITIALIZE, headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
    rebound = keyless.post("/mcp", json=INITIALIZE, headers={"Host": "evil.example:8080"})
    assert rebound.status_code == 421 and rebound.headers["content-type"] == PROBLEM
    other_site = keyless.post("/mcp", json=INITIALIZE, headers={"Origin": "http://evil.example"})
    assert other_site.status_code == 403 and other_site.headers["content-type"] == PROBLEM
    own = keyless.post("/mcp", json=INITIALIZE, headers={"Origin": "http://127.0.0.1:8080"})
    assert own.status_code == 200


def test_mcp_without_keys_refuses_another_sites_event_stream(keyless: TestClient) -> None:
    """A GET opens an event stream that holds a slot: not for another site's EventSource
    (the SDK's own Origin check refused it; the gateway's does now, in its problem shape)."""
    stream = {"Origin": "http://evil.example", "Accept": "text/event-stream"}
    r = keyless.get("/mcp", headers=stream)
    assert r.status_code == 403 and r.headers["content-type"] == PROBLEM
