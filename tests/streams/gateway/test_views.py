"""The console's read routes through a gateway with API keys: who calls, the namespaces a
key may read, sessions, timelines, operations (issue 27)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.streams.gateway.conftest import Gateways
from tests.streams.gateway.test_forget_routes import ingest
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


async def ingested(
    c: httpx.AsyncClient, ns: str, headers: dict[str, str], tag: str
) -> dict[str, Any]:
    """Its sessions once every one has its segment (written just after its records)."""
    await ingest(c, ns, headers, tag)

    async def sessions() -> dict[str, Any]:
        r = await c.get(f"/v1/namespaces/{ns}/sessions", headers=headers)
        assert r.status_code == 200, r.text
        return {s["session_id"]: s for s in r.json()["sessions"]}

    return await eventually(
        sessions,
        what=f"a segment in every session of {ns}",
        until=lambda found: all(s["segments"] for s in found.values()),
        timeout_s=120,
        interval_s=0.25,
    )


async def test_views_show_a_key_only_its_namespaces(gateways: Gateways) -> None:
    ns = f"gw-a-v{uuid.uuid4().hex[:6]}"  # key `all` (gw-*) may read it, keys a and b may not
    tag = "zv" + uuid.uuid4().hex[:8]
    every = gateways.headers("all")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=300) as c:
        await ingested(c, ns, every, tag)
        names = [
            n["namespace"]
            for n in (await c.get("/v1/namespaces", headers=every)).json()["namespaces"]
        ]
        assert ns in names and all(n.startswith("gw-") for n in names)
        (mine,) = [
            n
            for n in (await c.get("/v1/namespaces", headers=every)).json()["namespaces"]
            if n["namespace"] == ns
        ]
        assert mine["sessions"] == 2 and mine["turns"] == 3 and mine["searchable"]
        assert mine["segments"] == 2 and mine["records"] > 0 and mine["last_write"]
        for key in ("a", "b"):
            seen = (await c.get("/v1/namespaces", headers=gateways.headers(key))).json()
            assert ns not in [n["namespace"] for n in seen["namespaces"]]
            for path in ("sessions", "sessions/s1/timeline"):
                r = await c.get(f"/v1/namespaces/{ns}/{path}", headers=gateways.headers(key))
                assert r.status_code == 403, r.text
        assert (await c.get("/v1/namespaces")).status_code == 401
        me = (await c.get("/v1/whoami", headers=gateways.headers("a"))).json()
        assert me == {"name": "a", "namespaces": ["gw-a"], "keys_required": True}

        ops = (await c.get("/v1/operations", headers=every)).json()
        assert ops["stack_wide"] is False and ops["stages"] == [] and ops["dead_letters"] == {}
        assert ns in ops["construction_tokens"]
        assert all(n.startswith("gw-") for n in ops["construction_tokens"])


async def test_views_sessions_and_timeline_link_turns_segments_records(gateways: Gateways) -> None:
    ns, tag = f"gw-t{uuid.uuid4().hex[:6]}", "zt" + uuid.uuid4().hex[:8]
    h = gateways.headers("all")
    async with httpx.AsyncClient(base_url=gateways.urls[1], timeout=300) as c:
        s1 = (await ingested(c, ns, h, tag))["s1"]
        assert (s1["turns"], s1["segments"], s1["first_seq"], s1["last_seq"]) == (2, 1, 0, 1)
        assert s1["ended"] and s1["searchable"] and s1["records"] > 0

        r = await c.get(
            f"/v1/namespaces/{ns}/sessions/s1/timeline",
            headers=h,
            params={"page_size": 1, "page": 2},
        )
        assert r.status_code == 200, r.text
        tl = r.json()
        assert (tl["total"], tl["pages"], tl["page"]) == (2, 2, 2)
        (turn,) = tl["turns"]
        (segment,) = tl["segments"]
        assert turn["seq"] == 1 and tag in turn["content"] and "vector" not in turn
        assert turn["segment_id"] == segment["segment_id"] == f"{ns}/s1/0"
        assert segment["reason"] == "session_flush" and (
            segment["first_seq"],
            segment["last_seq"],
        ) == (0, 1)
        assert segment["exchanges"] == 2 and segment["records"]
        sources = {e for rec in segment["records"] for e in rec["evidence"]}
        assert turn["turn_id"] in sources  # record -> the turn it came from

        r = await c.get(
            f"/v1/namespaces/{ns}/sessions/s1/timeline",
            headers=h,
            params={"page_size": 1, "turn_id": turn["turn_id"]},
        )
        assert r.json()["page"] == 2  # the page holding that turn
        r = await c.get(
            f"/v1/namespaces/{ns}/sessions/s1/timeline", headers=h, params={"turn_id": "nope"}
        )
        assert r.status_code == 404 and r.json()["errors"][0]["field"] == "turn_id", r.text
        r = await c.get(
            f"/v1/namespaces/{ns}/sessions/s1/timeline", headers=h, params={"page_size": 501}
        )
        assert r.status_code == 422
