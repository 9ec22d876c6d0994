"""Dead letters through a gateway with API keys (issue 27 over issue 24): by reason with a
sample, replay with a dry run, a second replay refused unless forced; stack-wide keys only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from streams.stack.embedded import Stack
from tests.streams.gateway.conftest import Gateways
from tests.streams.gateway.dead_letters import (
    FAILED_REASON,
    UNPARSEABLE_TEXT,
    exchange,
    failed_exchange,
    misdirected,
    unparseable,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


async def reasons_of(
    c: httpx.AsyncClient, headers: dict[str, str], since: datetime, wanted: set[str]
) -> dict[str, dict[str, Any]]:
    """The exchanges' dead letters since `since` by reason, once every `wanted` one is in."""

    async def by_reason() -> dict[str, dict[str, Any]]:
        r = await c.get(
            "/v1/dead-letters",
            headers=headers,
            params={"topic": "memory.exchanges", "since": since.isoformat()},
        )
        assert r.status_code == 200, r.text
        return {row["error_type"]: row for row in r.json()["reasons"]}

    return await eventually(
        by_reason,
        what=f"dead letters of {sorted(wanted)}",
        until=lambda found: wanted <= found.keys(),
        timeout_s=120,
        interval_s=0.5,
    )


async def test_dead_letters_by_reason_and_replay_for_stack_wide_keys_only(
    gateways: Gateways, stack: Stack
) -> None:
    ns = f"gw-dl{uuid.uuid4().hex[:6]}"
    since = datetime.now(UTC) - timedelta(seconds=1)
    await unparseable(stack.bootstrap, ns)
    await failed_exchange(stack.bootstrap, exchange(ns, "s1", "I keep bees on the allotment."))
    root = gateways.headers("root")
    select = {"topic": "memory.exchanges", "error_type": "processing", "since": since.isoformat()}
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=120) as c:
        found = await reasons_of(c, root, since, {"json", "processing"})
        bad = found["json"]
        assert bad["topic"] == "memory.exchanges.dlq" and bad["count"] == 1
        assert bad["oldest"] and bad["oldest"] == bad["newest"] and bad["replayed_before"] == 0
        assert bad["sample"]["stage"] == "segmenter" and bad["sample"]["error"]
        assert bad["sample"]["source"].startswith("memory.exchanges ")
        assert bad["sample"]["value"] == UNPARSEABLE_TEXT  # the original bytes, as text
        assert found["processing"]["sample"]["error"] == FAILED_REASON

        for key in ("a", "all"):  # gw-a, gw-*: not every namespace
            r = await c.get("/v1/dead-letters", headers=gateways.headers(key))
            assert r.status_code == 403, r.text
            r = await c.post("/v1/dead-letters/replay", headers=gateways.headers(key), json=select)
            assert r.status_code == 403, r.text
        assert (await c.get("/v1/dead-letters")).status_code == 401
        r = await c.post("/v1/dead-letters/replay", json=select)
        assert r.status_code == 401
        form = await c.post("/v1/dead-letters/replay", headers=root, data=select)  # a form post
        assert form.status_code == 415, form.text

        async def replay(**extra: Any) -> httpx.Response:
            return await c.post("/v1/dead-letters/replay", headers=root, json={**select, **extra})

        dry = (await replay(dry_run=True)).json()
        assert (dry["selected"], len(dry["replayed"]), dry["refusal"]) == (1, 1, None)
        done = await replay()
        assert done.status_code == 200, done.text
        (sent,) = done.json()["replayed"]
        assert sent["replayed"]["to"].startswith("memory.exchanges ")
        await turn_arrives(c, root, ns, "allotment")  # the segmenter took it back

        again = await replay()
        assert again.status_code == 409 and "replayed before" in again.json()["detail"], again.text
        dry = (await replay(dry_run=True)).json()
        assert dry["replayed"] == [] and len(dry["already"]) == 1 and "refused" in dry["refusal"]
        found = await reasons_of(c, root, since, {"processing"})
        assert found["processing"]["replayed_before"] == 1
        forced = await replay(force=True)
        assert forced.status_code == 200 and len(forced.json()["replayed"]) == 1, forced.text


async def turn_arrives(c: httpx.AsyncClient, headers: dict[str, str], ns: str, text: str) -> None:
    async def turns() -> list[str] | str:
        r = await c.get(f"/v1/namespaces/{ns}/records", headers=headers, params={"turns": "true"})
        return [i["content"] for i in r.json()["items"]] if r.status_code == 200 else r.text

    await eventually(
        turns,
        what=f"a turn of {ns} saying {text!r}",
        until=lambda got: isinstance(got, list) and any(text in x for x in got),
        timeout_s=120,
        interval_s=0.5,
    )


async def test_replay_skips_what_a_forget_removed_and_letters_naming_a_foreign_topic(
    gateways: Gateways, stack: Stack
) -> None:
    """A dead-lettered exchange whose namespace is forgotten afterwards stays out, forced or
    not; a letter naming `memory.control` as its source is never written there; a letter of
    another namespace in the same selection is replayed."""
    tag = uuid.uuid4().hex[:6]
    gone, kept = f"gw-gone{tag}", f"gw-kept{tag}"
    root = gateways.headers("root")
    since = datetime.now(UTC) - timedelta(milliseconds=50)  # not the test before's letters
    select = {"topic": "memory.exchanges", "error_type": "processing", "since": since.isoformat()}
    secret = exchange(gone, "s1", "My locker code is 4711.")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=120) as c:
        first = {"session_id": "s0", "turns": [{"role": "user", "content": "hello"}]}
        r = await c.post(
            f"/v1/namespaces/{gone}/exchanges", headers=root, json={"exchanges": [first]}
        )
        assert r.status_code == 202, r.text
        (where,) = r.json()["sessions"]  # a position of this namespace in memory.exchanges
        await failed_exchange(stack.bootstrap, secret, where["partition"], where["offsets"][0])
        await failed_exchange(stack.bootstrap, exchange(kept, "s1", "I sing in a choir."))
        await misdirected(stack.bootstrap, exchange(kept, "s2", "I row."), "memory.control")
        r = await c.delete(f"/v1/namespaces/{gone}", headers=root)
        assert r.status_code == 200, r.text

        async def dry() -> dict[str, Any]:
            r = await c.post(
                "/v1/dead-letters/replay", headers=root, json={**select, "dry_run": True}
            )
            assert r.status_code == 200, r.text
            return dict(r.json())

        seen = await eventually(
            dry, what="the three letters listed", until=lambda d: d["selected"] == 3, timeout_s=120
        )
        assert [x["id"] for x in seen["forgotten"]] and len(seen["misdirected"]) == 1
        done = await c.post("/v1/dead-letters/replay", headers=root, json={**select, "force": True})
        assert done.status_code == 200, done.text
        body = done.json()
        assert (
            len(body["replayed"]) == 1
            and "memory.exchanges " in body["replayed"][0]["replayed"]["to"]
        )
        assert len(body["forgotten"]) == 1 and len(body["misdirected"]) == 1
        assert body["misdirected"][0]["named"] == "memory.control"
        await turn_arrives(c, root, kept, "choir")  # the replay went through
        r = await c.post(
            f"/v1/namespaces/{gone}/search", headers=root, json={"query": "locker code", "k": 5}
        )
        assert r.status_code == 200 and not any("4711" in e["text"] for e in r.json()["evidence"])
        r = await c.get(f"/v1/namespaces/{gone}/records", headers=root, params={"turns": "true"})
        assert r.json()["items"] == []
