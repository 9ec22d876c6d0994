"""Listing and forgetting through the gateway's HTTP routes and MCP tools (issue 12)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.streams.gateway.conftest import Gateways
from tests.streams.gateway.test_gateway import PROBLEM, ex, wait_status
from tests.streams.gateway.test_mcp import http_client
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def lines(tag: str) -> list[dict[str, Any]]:
    return [
        ex("s1", f"{tag}-1", f"I keep a {tag} kayak in the shed behind the house."),
        ex("s1", f"{tag}-2", f"On Sundays I paddle the {tag} kayak across the lake."),
        ex("s2", f"{tag}-3", "My sister moved to Porto last autumn."),
    ]


async def ingest(c: httpx.AsyncClient, ns: str, headers: dict[str, str], tag: str) -> None:
    r = await c.post(
        f"/v1/namespaces/{ns}/exchanges", json={"exchanges": lines(tag)}, headers=headers
    )
    assert r.status_code == 202, r.text
    for sid in ("s1", "s2"):
        r = await c.post(f"/v1/namespaces/{ns}/sessions/{sid}/end", headers=headers)
        assert r.status_code == 202, r.text
    await wait_status(c, ns, headers, lambda b: b["searchable"] and len(b["sessions"]) == 2)
    # records follow the turns once each ended session's segment is encoded

    async def without_records() -> list[str]:
        empty = []
        for sid in ("s1", "s2"):
            r = await c.get(
                f"/v1/namespaces/{ns}/records", params={"session_id": sid}, headers=headers
            )
            assert r.status_code == 200, r.text
            if not r.json()["total"]:
                empty.append(sid)
        return empty

    await eventually(
        without_records,
        what=f"records of every session of {ns}",
        until=lambda empty: not empty,
        timeout_s=240,
        interval_s=0.25,
    )


async def test_gateway_records_listing_and_delete_routes_check_keys_and_forget(
    gateways: Gateways,
) -> None:
    ns, tag = f"gw-del-{uuid.uuid4().hex[:6]}", "zq" + uuid.uuid4().hex[:8]
    ok = gateways.headers("all")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=300) as c:
        for method, path in (("GET", "/records"), ("DELETE", ""), ("DELETE", "/sessions/s1")):
            for headers, want in (({}, 401), (gateways.headers("a"), 403)):
                r = await c.request(method, f"/v1/namespaces/{ns}{path}", headers=headers)
                assert r.status_code == want and r.headers["content-type"] == PROBLEM, r.text
        await ingest(c, ns, ok, tag)
        r = await c.get(f"/v1/namespaces/{ns}/records", params={"turns": "true"}, headers=ok)
        assert r.status_code == 200, r.text
        assert r.json()["total"] == 3 and r.json()["kind"] == "turns"
        r = await c.get(
            f"/v1/namespaces/{ns}/records", params={"session_id": "s1", "page_size": 1}, headers=ok
        )
        page = r.json()
        assert r.status_code == 200 and page["page_size"] == 1 and len(page["items"]) == 1
        bad = await c.get(f"/v1/namespaces/{ns}/records", params={"memory_type": "x"}, headers=ok)
        assert bad.status_code == 422 and "memory_type" in bad.text

        r = await c.delete(f"/v1/namespaces/{ns}/sessions/s1", headers=ok)
        assert r.status_code == 200, r.text
        assert r.json()["rows_removed"]["turns"] == 2
        r = await c.get(f"/v1/namespaces/{ns}/records", params={"turns": "true"}, headers=ok)
        assert [t["session_id"] for t in r.json()["items"]] == ["s2"]
        r = await c.get(f"/v1/namespaces/{ns}/records", headers=ok)
        assert all(tag not in rec["semantic_text"] for rec in r.json()["items"])

        r = await c.delete(f"/v1/namespaces/{ns}", headers=ok)
        assert r.status_code == 200, r.text
        assert r.json()["rows_removed"]["turns"] == 1
        assert set(r.json()["stages"]) == {"segmenter", "encoder", "indexer"}
        r = await c.get(f"/v1/namespaces/{ns}/records", params={"turns": "true"}, headers=ok)
        assert r.json()["total"] == 0


async def test_mcp_list_memories_and_delete_all_memories_needs_the_namespace_confirmed(
    gateways: Gateways,
) -> None:
    ns, tag = f"gw-mcp-{uuid.uuid4().hex[:6]}", "zq" + uuid.uuid4().hex[:8]
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=300) as c:
        await ingest(c, ns, gateways.headers("all"), tag)
    async with http_client(gateways, "all") as client:
        listed = await client.call_tool("list_memories", {"namespace": ns, "turns": True})
        assert not listed.is_error, listed.content
        assert (listed.structured_content or {})["total"] == 3
        refused = await client.call_tool("delete_all_memories", {"namespace": ns, "confirm": "yes"})
        assert refused.is_error and "confirm" in refused.content[0].text
        again = await client.call_tool("list_memories", {"namespace": ns, "turns": True})
        assert (again.structured_content or {})["total"] == 3  # nothing was deleted
        done = await client.call_tool("delete_all_memories", {"namespace": ns, "confirm": ns})
        assert not done.is_error, done.content
        assert (done.structured_content or {})["rows_removed"]["turns"] == 3
        empty = await client.call_tool("list_memories", {"namespace": ns})
        assert (empty.structured_content or {})["total"] == 0
