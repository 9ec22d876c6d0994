"""The HTTP gateway end to end: two gateway processes, the real broker, Redis and workers."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import httpx
import lancedb
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from schemas import topics as t
from schemas.base import MAX_SEQ
from streams.settings import Settings
from streams.status import metrics_endpoints
from tests.streams.gateway.conftest import Gateways
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # two gateways to start

PROBLEM = "application/problem+json"


def turn(text: str, speaker: str = "Noor") -> dict[str, Any]:
    return {"role": "user", "speaker": speaker, "content": text}


def ex(sid: str, eid: str, text: str, **kw: Any) -> dict[str, Any]:
    return {"session_id": sid, "exchange_id": eid, "turns": [turn(text)], **kw}


async def wait_status(
    client: httpx.AsyncClient, ns: str, headers: dict[str, str], until: Any, timeout_s: float = 240
) -> dict[str, Any]:
    async def status() -> dict[str, Any] | None:
        try:
            r = await client.get(f"/v1/namespaces/{ns}/status", headers=headers)
        except httpx.RemoteProtocolError:  # a pooled connection the server's keep-alive closed
            return None
        assert r.status_code == 200, r.text
        return dict(r.json())

    found = await eventually(
        status,
        what=f"the status of {ns} to hold",
        until=lambda body: body is not None and until(body),
        timeout_s=timeout_s,
        interval_s=0.25,
    )
    assert found is not None
    return found


async def test_gateway_routes_add_search_status_flush_end(gateways: Gateways) -> None:
    h = gateways.headers("a")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=60) as c:
        body = {
            "exchanges": [
                ex("s1", "e1", "I moved to Tallinn in March for a job at a ferry company."),
                ex(
                    "s1",
                    "e2",
                    "My brother Ilmar visits every second weekend, on the early ferry from "
                    "Helsinki, and brings rye bread from the market hall near his flat.",
                ),
            ]
        }
        r = await c.post("/v1/namespaces/gw-a/exchanges", json=body, headers=h)
        assert r.status_code == 202, r.text
        receipt = r.json()
        assert [(x["exchange_id"], x["seq"], x["duplicate"]) for x in receipt["exchanges"]] == [
            ("e1", 0, False),
            ("e2", 1, False),
        ]
        (session,) = receipt["sessions"]
        assert session["last_seq"] == 1 and session["offsets"][0] < session["offsets"][1]

        # the same ids again (through the other replica): the first receipt, nothing added
        async with httpx.AsyncClient(base_url=gateways.urls[1], timeout=60) as other:
            again = await other.post("/v1/namespaces/gw-a/exchanges", json=body, headers=h)
        assert again.status_code == 202
        assert again.json()["exchanges"] == [{**x, "duplicate": True} for x in receipt["exchanges"]]

        r = await c.post(
            "/v1/namespaces/gw-a/search",
            headers=h,
            json={"query": "Which city did Noor move to?", "k": 3, "wait_for": receipt},
        )
        assert r.status_code == 200, r.text
        reply = r.json()
        assert reply["status"] == "ok" and reply["namespace"] == "gw-a"
        assert any("Tallinn" in e["text"] for e in reply["evidence"])
        # the evidence an agent gives 64 tokens of its prompt: the items that fit, in order
        r = await c.post(
            "/v1/namespaces/gw-a/search",
            headers=h,
            json={"query": "Which city did Noor move to?", "k": 3, "token_budget": 64},
        )
        assert r.status_code == 200, r.text
        small = r.json()
        assert small["context_tokens"] <= 64 < reply["context_tokens"], (small, reply)
        assert small["evidence"] == [e for e in reply["evidence"] if e in small["evidence"]]

        r = await c.get("/v1/namespaces/gw-a/status", headers=h)
        (st,) = r.json()["sessions"]
        assert st["last_seq_accepted"] == 1 and st["indexed_seq"] == 1 and st["searchable"]
        assert st["segmented_seq"] == 1 and r.json()["searchable"]

        r = await c.post("/v1/namespaces/gw-a/sessions/s1/flush", headers=h)
        assert r.status_code == 202 and r.json()["after_seq"] == 1 and r.json()["kind"] == "flush"
        r = await c.post("/v1/namespaces/gw-a/sessions/s1/end", headers=h)
        assert r.status_code == 202 and r.json()["kind"] == "end_session"
        await wait_status(c, "gw-a", h, lambda b: b["sessions"][0]["ended"])

        assert (await c.get("/healthz")).json() == {"status": "ok"}
        ready = await c.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"broker": "ok", "redis": "ok", "lancedb": "ok"}
        assert (await c.get("/docs")).status_code == 200
        spec = (await c.get("/openapi.json")).json()
        assert {
            "/v1/namespaces/{namespace}/exchanges",
            "/v1/namespaces/{namespace}/search",
            "/v1/namespaces/{namespace}/status",
            "/v1/namespaces/{namespace}/sessions/{session_id}/flush",
            "/v1/namespaces/{namespace}/sessions/{session_id}/end",
        } <= set(spec["paths"])


async def test_gateway_errors_are_problems_that_name_the_field(gateways: Gateways) -> None:
    h = gateways.headers("a")
    url = "/v1/namespaces/gw-a/exchanges"

    async def check(r: httpx.Response, status: int, field: str) -> None:
        assert r.status_code == status, r.text
        assert r.headers["content-type"] == PROBLEM
        body = r.json()
        assert body["status"] == status and field in [e["field"] for e in body["errors"]], body

    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=60) as c:
        r = await c.post(url, headers=h, json={"exchanges": [{"session_id": "p1", "turns": []}]})
        await check(r, 422, "exchanges.0.turns")
        r = await c.post(url, headers=h, json={"exchanges": [ex("bad id!", "x", "hi")]})
        await check(r, 422, "exchanges.0.session_id")
        r = await c.post(
            url, headers=h, json={"exchanges": [ex("p1", "x", "hi", namespace="gw-b")]}
        )
        await check(r, 422, "exchanges.0.namespace")
        r = await c.post(url, headers=h, json={"exchanges": [ex("p1", "x", "hi", colour="red")]})
        await check(r, 422, "exchanges.0.colour")
        # a moment no listing could read back (year 10000 in UTC), a seq past the largest
        late = ex("p1", "x", "hi")
        late["turns"][0]["created_at"] = "9999-12-31T23:30:00-05:00"
        r = await c.post(url, headers=h, json={"exchanges": [late]})
        await check(r, 422, "exchanges.0.turns.0.created_at")
        flush = "/v1/namespaces/gw-a/sessions/p1/flush"
        r = await c.post(flush, headers=h, json={"after_seq": MAX_SEQ + 1})
        await check(r, 422, "after_seq")
        r = await c.post(url, headers={**h, "content-type": "application/json"}, content=b"{x")
        assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
        r = await c.post(
            "/v1/namespaces/bad name!/exchanges",
            headers=h,
            json={"exchanges": [ex("p1", "x", "hi")]},
        )
        await check(r, 422, "namespace")
        # a synchronous call is refused whole (nothing of it is added), naming the exchange
        # over the contract's limit by its index and field
        mixed = [ex("p3", "ok1", "hi"), ex("p3", "long", "z" * 200_001), ex("p3", "ok2", "yo")]
        r = await c.post(url, headers=h, json={"exchanges": mixed})
        await check(r, 422, "exchanges.1.turns.0.content")
        assert "at most 200000 characters" in r.json()["detail"]
        many = {"exchanges": [ex("p1", f"m{i}", "hi") for i in range(51)]}
        await check(await c.post(url, headers=h, json=many), 413, "exchanges")
        # each turn within the contract, the exchange over what the stages read: refused now,
        # not dead-lettered after a 202 (nothing of the request is produced)
        wide = ex("p4", "wide", "a")
        wide["turns"] = [turn("w" * 199_999) for _ in range(6)]
        r = await c.post(url, headers=h, json={"exchanges": [ex("p4", "fine", "hi"), wide]})
        await check(r, 413, "exchanges.1")
        assert "LYCHEE_MAX_MESSAGE_BYTES" in r.json()["detail"]
        r = await c.post("/v1/namespaces/gw-a/search", headers=h, json={"query": "x", "k": 0})
        await check(r, 422, "k")
        for budget in (10, "500"):
            body = {"query": "x", "token_budget": budget}
            r = await c.post("/v1/namespaces/gw-a/search", headers=h, json=body)
            await check(r, 422, "token_budget")
        # a number in other clothes is the caller's mistake, named, not read as the number
        for k in ("5", 2.0, True):
            r = await c.post("/v1/namespaces/gw-a/search", headers=h, json={"query": "x", "k": k})
            await check(r, 422, "k")
        for seq in ("3", True):
            r = await c.post(url, headers=h, json={"exchanges": [ex("p1", "x", "hi", seq=seq)]})
            await check(r, 422, "exchanges.0.seq")
        r = await c.post("/v1/namespaces/gw-a/search", headers=h, json={"query": " \n "})
        await check(r, 422, "query")  # the query service's 502 before
        r = await c.post(
            "/v1/namespaces/gw-a/search",
            headers=h,
            json={
                "query": "x",
                "wait_for": {
                    "namespace": "gw-other",
                    "sessions": [{"session_id": "p1", "last_seq": 0}],
                },
            },
        )
        await check(r, 422, "wait_for.namespace")

        # seq: the caller's must come after what the session has; an id keeps its words
        ok = await c.post(url, headers=h, json={"exchanges": [ex("p2", "q1", "first", seq=5)]})
        assert ok.status_code == 202 and ok.json()["exchanges"][0]["seq"] == 5
        stale = await c.post(url, headers=h, json={"exchanges": [ex("p2", "q2", "old", seq=5)]})
        await check(stale, 409, "exchanges.0.seq")
        changed = await c.post(url, headers=h, json={"exchanges": [ex("p2", "q1", "other words")]})
        await check(changed, 409, "exchanges.0.exchange_id")
        assert "other content" in changed.json()["detail"]
        flagged = ex("p2", "q1", "first", seq=5)  # the same words, now not memory
        flagged["turns"][0]["memory"] = False
        await check(
            await c.post(url, headers=h, json={"exchanges": [flagged]}),
            409,
            "exchanges.0.exchange_id",
        )
        nxt = await c.post(url, headers=h, json={"exchanges": [ex("p2", "q3", "next")]})
        assert nxt.json()["exchanges"][0]["seq"] == 6
        # a caller's seq without an id: sent again (after a 503, say), the same exchange
        bare = {"session_id": "p2", "seq": 7, "turns": [turn("no id of mine")]}
        first = (await c.post(url, headers=h, json={"exchanges": [bare]})).json()["exchanges"][0]
        again = await c.post(url, headers=h, json={"exchanges": [bare]})
        assert again.status_code == 202, again.text
        (resent,) = again.json()["exchanges"]
        assert (resent["exchange_id"], resent["seq"]) == (first["exchange_id"], 7)
        assert not first["duplicate"] and resent["duplicate"]
        # a turn id names one turn of the session: other words under it would replace it
        said = ex("p2", "q6", "my passport is X1")
        said["turns"][0]["turn_id"] = "msg"
        assert (await c.post(url, headers=h, json={"exchanges": [said]})).status_code == 202
        reused = ex("p2", "q7", "my flight leaves at 9")
        reused["turns"][0]["turn_id"] = "msg"
        r = await c.post(url, headers=h, json={"exchanges": [reused]})
        await check(r, 409, "exchanges.0.turns.0.turn_id")
        assert "new turn_id" in r.json()["detail"]
        # ... also the id an exchange id made for a turn that named none ("q3#0")
        impostor = ex("p2", "q8", "my flight leaves at 10")
        impostor["turns"][0]["turn_id"] = "q3#0"
        r = await c.post(url, headers=h, json={"exchanges": [impostor]})
        await check(r, 409, "exchanges.0.turns.0.turn_id")

        # a seq past what the gateway accepted is no receipt: said at once, not waited for; a
        # session it never accepted for (a Kafka producer's) is waited for to the deadline
        def waiting(session: str, seq: int) -> dict[str, object]:
            sessions = [
                {"session_id": "p2", "last_seq": 0},
                {"session_id": session, "last_seq": seq},
            ]
            return {"query": "x", "timeout_s": 0.5, "wait_for": {"sessions": sessions}}

        made_up = await c.post("/v1/namespaces/gw-a/search", headers=h, json=waiting("p2", 99))
        await check(made_up, 422, "wait_for.sessions.1.last_seq")
        assert "accepted up to seq" in made_up.json()["detail"]
        timeout = await c.post("/v1/namespaces/gw-a/search", headers=h, json=waiting("p9", 0))
        await check(timeout, 504, "wait_for")
        assert "session 'p9' to seq 0: none yet" in timeout.json()["detail"]

        # the largest seq is taken once, then the session's seqs are used up; its status reads
        last = {"exchanges": [ex("p3", "q4", "the last", seq=MAX_SEQ)]}
        top = await c.post(url, headers=h, json=last)
        assert top.status_code == 202 and top.json()["exchanges"][0]["seq"] == MAX_SEQ
        full = await c.post(url, headers=h, json={"exchanges": [ex("p3", "q5", "one more")]})
        await check(full, 409, "exchanges.0.seq")
        assert "used up" in full.json()["detail"]
        status = await c.get("/v1/namespaces/gw-a/status", headers=h, params={"session_id": "p3"})
        [session] = status.json()["sessions"]
        assert status.status_code == 200 and session["last_seq_accepted"] == MAX_SEQ


ROUTES = [
    ("POST", "/v1/namespaces/{ns}/exchanges", {"exchanges": [ex("s", "auth-1", "hello")]}),
    ("POST", "/v1/namespaces/{ns}/sessions/s/flush", None),
    ("POST", "/v1/namespaces/{ns}/sessions/s/end", None),
    ("POST", "/v1/namespaces/{ns}/search", {"query": "hello", "timeout_s": 60}),
    ("GET", "/v1/namespaces/{ns}/status", None),
]


async def test_gateway_key_for_a_gets_403_on_b_and_no_key_401_on_every_route(
    gateways: Gateways,
) -> None:
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=60) as c:
        for method, path, body in ROUTES:
            for headers, ns, want in (
                ({}, "gw-a", 401),
                ({"Authorization": "Bearer lyk_not-a-key"}, "gw-a", 401),
                (gateways.headers("a"), "gw-b", 403),
                ({"X-API-Key": gateways.keys["a"]}, "gw-b", 403),
                (gateways.headers("b"), "gw-a", 403),
                (gateways.headers("all"), "other", 403),
            ):
                r = await c.request(method, path.format(ns=ns), json=body, headers=headers)
                assert r.status_code == want, (method, path, ns, r.text)
                assert r.headers["content-type"] == PROBLEM
                if want == 401:
                    assert r.headers["www-authenticate"] == "Bearer"
            # the same route with the right key works (the wildcard key too)
            for name, ns in (("b", "gw-b"), ("all", "gw-b")):
                r = await c.request(
                    method, path.format(ns=ns), json=body, headers=gateways.headers(name)
                )
                assert r.status_code in (200, 202), (method, path, r.text)


@pytest.mark.timeout(900)
async def test_gateway_concurrent_resends_of_one_exchange_id_produce_it_once(
    gateways: Gateways,
) -> None:
    """Thirty callers send one exchange id at once to one gateway process: one of them wrote
    it, the others are told it is a duplicate with the same seq and offset (each was told it
    wrote it, and each was produced). Across replicas the session's lease orders them."""
    h = gateways.headers("all")
    body = {"exchanges": [ex("d", "same-9", "I keep a cactus named Spike.")]}
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=60) as client:
        replies = await asyncio.gather(
            *(
                client.post("/v1/namespaces/gw-dup/exchanges", json=body, headers=h)
                for _ in range(30)
            )
        )
    assert all(r.status_code == 202 for r in replies), [r.text for r in replies]
    got = [r.json()["exchanges"][0] for r in replies]
    assert sum(not x["duplicate"] for x in got) == 1, got
    assert {(x["seq"], x["partition"], x["offset"]) for x in got} == {
        (0, got[0]["partition"], got[0]["offset"])
    }


async def test_gateway_1000_concurrent_adds_lose_nothing_and_keep_session_order(
    gateways: Gateways, settings: Settings
) -> None:
    """Ten sessions, a hundred callers each, all at once through two gateway replicas, none
    giving a seq: every exchange gets its own seq, the partition order is the seq order, and
    the indexer ends up with exactly seqs 0..99 of every session."""
    ns, sessions, per = "gw-load", 10, 100
    h = gateways.headers("all")
    # a connection per request: a pooled one the server closes as idle (uvicorn's 5 s
    # keep-alive) while a retry after Retry-After picks it is reset, and an add without a
    # seq cannot be sent again blindly
    limits = httpx.Limits(max_connections=500, max_keepalive_connections=0)
    clients = [httpx.AsyncClient(base_url=u, timeout=180, limits=limits) for u in gateways.urls]
    try:

        async def add(i: int) -> dict[str, Any]:
            sid, n = f"s{i % sessions}", i // sessions
            body = {"exchanges": [ex(sid, f"{sid}-{n}", f"Load line {n} of session {sid}.")]}
            for _ in range(30):  # as a client should: a 503 with Retry-After is tried again
                r = await clients[i % 2].post(
                    f"/v1/namespaces/{ns}/exchanges", json=body, headers=h
                )
                if r.status_code != 503:
                    break
                await asyncio.sleep(float(r.headers["Retry-After"]))
            assert r.status_code == 202, r.text
            return dict(r.json()["exchanges"][0])

        got = await asyncio.gather(*(add(i) for i in range(sessions * per)))
        by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for x in got:
            by_session[x["session_id"]].append(x)
        for sid, xs in by_session.items():
            assert sorted(x["seq"] for x in xs) == list(range(per)), sid
            in_seq_order = sorted(xs, key=lambda x: x["seq"])
            assert len({x["partition"] for x in xs}) == 1
            offsets = [x["offset"] for x in in_seq_order]
            assert offsets == sorted(offsets), f"{sid}: partition order is not seq order"
        status = await wait_status(
            clients[0],
            ns,
            h,
            lambda b: len(b["sessions"]) == sessions and b["searchable"],
            timeout_s=600,
        )
        assert all(s["last_seq_accepted"] == per - 1 for s in status["sessions"])
        assert all(s["segmented_seq"] == per - 1 for s in status["sessions"])
    finally:
        for c in clients:
            await c.aclose()
    rows = (
        lancedb.connect(settings.store.uri)
        .open_table("turns")
        .search()
        .where(f"namespace = '{ns}'")
        .select(["session_id", "exchange_id", "seq"])
        .limit(None)
        .to_list()
    )
    assert len(rows) == sessions * per
    seq_of = {(x["session_id"], x["exchange_id"]): x["seq"] for x in got}
    assert {(r["session_id"], r["exchange_id"]): r["seq"] for r in rows} == seq_of


async def test_gateway_metrics_endpoints_scrape_with_the_named_series(
    gateways: Gateways, settings: Settings
) -> None:
    # a bad message, so that the segmenter has a dead letter to count
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(t.EXCHANGES, b"not json", key=b"gw-metrics/s")
    finally:
        await producer.stop()
    h = gateways.headers("a")
    async with httpx.AsyncClient(base_url=gateways.urls[0], timeout=60) as c:
        r = await c.post(
            "/v1/namespaces/gw-a/exchanges",
            headers=h,
            json={"exchanges": [ex("m1", "m1", "Metrics are scraped.")]},
        )
        found = await c.post(
            "/v1/namespaces/gw-a/search",
            headers=h,
            json={"query": "what is scraped", "timeout_s": 60, "wait_for": r.json()},
        )
        assert found.status_code == 200, found.text
        await c.post("/v1/namespaces/gw-a/sessions/m1/flush", headers=h)  # a segment to encode
    wanted: dict[str, list[tuple[str, dict[str, str]]]] = {
        "segmenter": [
            ("lychee_messages_in_total", {"stage": "segmenter", "topic": t.EXCHANGES}),
            ("lychee_messages_out_total", {"topic": t.TURNS}),
            ("lychee_messages_out_total", {"topic": t.SEGMENTS}),
            (
                "lychee_messages_dead_lettered_total",
                {"stage": "segmenter", "topic": t.EXCHANGES, "error_type": "json"},
            ),
            ("lychee_stage_batch_seconds_bucket", {"stage": "segmenter"}),
            ("lychee_stage_batch_size_count", {"stage": "segmenter"}),
            ("lychee_consumer_lag", {"stage": "segmenter", "topic": t.EXCHANGES}),
            ("lychee_embedding_batch_size_count", {"stage": "segmenter"}),
            ("lychee_embedding_seconds_bucket", {"stage": "segmenter"}),
        ],
        "indexer": [
            ("lychee_messages_in_total", {"stage": "indexer", "topic": t.TURNS}),
            ("lychee_stage_batch_seconds_count", {"stage": "indexer"}),
            ("lychee_consumer_lag", {"stage": "indexer", "topic": t.TURNS}),
        ],
        "encoder": [
            ("lychee_messages_in_total", {"stage": "encoder", "topic": t.SEGMENTS}),
            ("lychee_messages_out_total", {"topic": t.RECORDS}),
            ("lychee_consumer_lag", {"stage": "encoder", "topic": t.SEGMENTS}),
        ],
        "query": [
            ("lychee_queries_total", {"outcome": "ok"}),
            ("lychee_retrieval_seconds_bucket", {"step": "plan"}),
            ("lychee_retrieval_seconds_count", {"step": "recall.turn_vector"}),
            ("lychee_retrieval_seconds_count", {"step": "recall.record_text"}),
            ("lychee_retrieval_seconds_count", {"step": "selection"}),
            ("lychee_retrieval_seconds_count", {"step": "total"}),
            ("lychee_messages_out_total", {"topic": t.REPLIES}),
        ],
        "gateway": [
            (
                "lychee_gateway_request_seconds_count",
                {
                    "method": "POST",
                    "route": "/v1/namespaces/{namespace}/exchanges",
                    "status": "202",
                },
            ),
            (
                "lychee_gateway_request_seconds_bucket",
                {"method": "POST", "route": "/v1/namespaces/{namespace}/search", "status": "200"},
            ),
            ("lychee_gateway_exchanges_total", {"outcome": "accepted"}),
            ("lychee_gateway_in_flight", {}),
        ],
    }

    def has(samples: list[tuple[str, dict[str, str]]], name: str, labels: dict[str, str]) -> bool:
        return any(n == name and labels.items() <= ls.items() for n, ls in samples)

    by_stage: dict[str, list[str]] = defaultdict(list)

    async def missing() -> list[tuple[str, str, dict[str, str]]]:
        by_stage.clear()
        for e in await metrics_endpoints(settings):
            by_stage[e["stage"]].append(e["url"])
        samples: dict[str, list[tuple[str, dict[str, str]]]] = defaultdict(list)
        async with httpx.AsyncClient(timeout=30) as scrape:
            for stage, urls in by_stage.items():
                for u in urls:
                    for family in text_string_to_metric_families((await scrape.get(u)).text):
                        samples[stage] += [(x.name, x.labels) for x in family.samples]
        return [
            (stage, name, labels)
            for stage, series in wanted.items()
            for name, labels in series
            if not has(samples[stage], name, labels)
        ]

    await eventually(
        missing,
        what="every wanted series on the stages' /metrics",
        until=lambda left: not left,
        timeout_s=180,
        interval_s=1,
    )
    assert set(by_stage) >= {"segmenter", "encoder", "indexer", "query", "gateway"}
    # every gateway of this module registers (the session's stack may hold other tests' too)
    assert {f"{u}/metrics" for u in gateways.urls} <= set(by_stage["gateway"])
