"""A namespace's history through the gateway's route and MCP tool: the indexer's rules link
a later value to the earlier one, and both callers see the change (issue 44)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.streams.gateway.conftest import Gateways
from tests.streams.gateway.test_gateway import ex, wait_status
from tests.streams.gateway.test_mcp import http_client
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SAID = (
    ("s1", "2024-03-01T10:00:00Z", "The greenhouse heater draws 900 watts on cold nights."),
    ("s2", "2024-04-02T10:00:00Z", "The greenhouse heater now draws 650 watts at night."),
)


async def first_supersession(
    c: httpx.AsyncClient, ns: str, headers: dict[str, str]
) -> dict[str, Any]:
    """The namespace's history once the indexer has linked a supersession."""

    async def history() -> dict[str, Any]:
        r = await c.get(f"/v1/namespaces/{ns}/history", headers=headers)
        assert r.status_code == 200, r.text
        return dict(r.json())

    return await eventually(
        history,
        what=f"a supersession in {ns}",
        until=lambda h: bool(h["supersessions"]),
        timeout_s=240,
        interval_s=0.5,
    )


async def test_history_route_and_tool_show_what_replaced_what(gateways: Gateways) -> None:
    ns, headers = f"gw-a-h{uuid.uuid4().hex[:6]}", gateways.headers("all")
    body = {"exchanges": [ex(sid, f"{sid}-1", text, session_date=when) for sid, when, text in SAID]}
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=300) as c:
        r = await c.post(f"/v1/namespaces/{ns}/exchanges", json=body, headers=headers)
        assert r.status_code == 202, r.text
        for sid in ("s1", "s2"):
            r = await c.post(f"/v1/namespaces/{ns}/sessions/{sid}/end", headers=headers)
            assert r.status_code == 202, r.text
        await wait_status(c, ns, headers, lambda b: b["searchable"] and len(b["sessions"]) == 2)

        found = await first_supersession(c, ns, headers)
        (change,) = found["supersessions"]
        assert change["older"]["text"] == SAID[0][2] and change["newer"]["text"] == SAID[1][2]
        assert change["found_by"] == "rule:value-change" and change["newer"]["turn_ids"]
        assert change["changed_at"].startswith("2024-04-02") and found["conflicts"] == []
        other = await c.get(f"/v1/namespaces/{ns}/history", headers=gateways.headers("b"))
        assert other.status_code == 403, other.text
    async with http_client(gateways, "all") as client:
        got = await client.call_tool("memory_history", {"namespace": ns})
        assert not got.is_error, got.content
        assert (got.structured_content or {})["supersessions"][0]["reason"] == change["reason"]


async def test_history_of_a_record_the_namespace_does_not_hold_is_a_404(
    gateways: Gateways,
) -> None:
    ns, headers = f"gw-a-m{uuid.uuid4().hex[:6]}", gateways.headers("all")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=120) as c:
        # a namespace with nothing stored: an empty history, as its records and status
        empty = await c.get(f"/v1/namespaces/{ns}/history", headers=headers)
        assert empty.status_code == 200, empty.text
        assert (empty.json()["supersessions"], empty.json()["conflicts"]) == ([], [])
        listed = await c.get(f"/v1/namespaces/{ns}/records", headers=headers)
        assert listed.status_code == 200 and listed.json()["total"] == 0, listed.text
        # one record's history, of an id it does not hold: not "never replaced"
        r = await c.get(f"/v1/namespaces/{ns}/history?record_id=nope", headers=headers)
        assert r.status_code == 404, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        problem = r.json()
        assert problem["title"] == "Not Found" and problem["status"] == 404
        assert problem["detail"] == f"no record nope in namespace {ns}"
        assert problem["errors"] == [{"field": "record_id", "message": problem["detail"]}]
        # an id no record has, twenty thousand characters long: refused, not echoed
        long = await c.get(f"/v1/namespaces/{ns}/history?record_id={'x' * 20_000}", headers=headers)
        assert long.status_code == 422 and len(long.text) < 2_000, long.text[:300]
    async with http_client(gateways, "all") as client:
        got = await client.call_tool("memory_history", {"namespace": ns, "record_id": "nope"})
        assert got.is_error and f"no record nope in namespace {ns}" in str(got.content)


async def test_undated_exchanges_are_dated_when_accepted_and_link_across_sessions(
    gateways: Gateways,
) -> None:
    ns, headers = f"gw-a-u{uuid.uuid4().hex[:6]}", gateways.headers("all")
    said = ("My monthly rent is $1,200.", "My monthly rent is now $950.")
    bodies = [{"exchanges": [ex(f"chat-{n}", f"chat-{n}-1", text)]} for n, text in enumerate(said)]
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=300) as c:
        receipts = []
        for n, body in enumerate(bodies):
            r = await c.post(f"/v1/namespaces/{ns}/exchanges", json=body, headers=headers)
            assert r.status_code == 202, r.text
            receipts.append(r.json())
            r = await c.post(f"/v1/namespaces/{ns}/sessions/chat-{n}/end", headers=headers)
            assert r.status_code == 202, r.text
        # a client's retry of the first add, stamped anew: the same exchange, not a new one
        again = await c.post(f"/v1/namespaces/{ns}/exchanges", json=bodies[0], headers=headers)
        assert again.status_code == 202, again.text
        assert again.json()["exchanges"] == [
            {**x, "duplicate": True} for x in receipts[0]["exchanges"]
        ]
        await wait_status(c, ns, headers, lambda b: b["searchable"] and len(b["sessions"]) == 2)
        turns = await c.get(f"/v1/namespaces/{ns}/records?turns=true", headers=headers)
        dates = [t["session_date"] for t in turns.json()["items"]]
        assert len(dates) == 2 and all(dates), turns.text

        found = await first_supersession(c, ns, headers)
        (change,) = found["supersessions"]
        assert "$1,200" in change["older"]["text"] and "$950" in change["newer"]["text"]
