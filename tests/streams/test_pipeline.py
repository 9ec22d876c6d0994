"""End to end through a real broker, Redis and worker processes (DESIGN §9)."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections import defaultdict
from datetime import datetime

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from redis.asyncio import Redis

from schemas import Exchange, QueryReply, Role, Segment, Turn
from schemas import topics as t
from streams.client import MemoryClient
from streams.factories import embedding_info
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.settings import Settings
from streams.stack.embedded import Stack
from tests.waiting import eventually
from workers.store import EvidenceStore

pytestmark = pytest.mark.integration

DIALOGUE = [
    ("Priya", "I signed up for the Lisbon half-marathon on the 12th of May."),
    ("Tomas", "Nice! How is the training going so far?"),
    ("Priya", "I ran eighteen kilometres on Sunday and my left knee held up."),
    ("Tomas", "I finally started a sourdough starter, I named it Bubbles."),
    ("Priya", "Ha, Bubbles! What flour are you feeding it?"),
    ("Tomas", "Rye flour every morning, and it doubled overnight yesterday."),
    ("Priya", "By the way, I accepted the job offer from the bike repair shop."),
    ("Tomas", "Congratulations, when do you start at the shop?"),
]


def conversation(ns: str, sessions: int = 1, per_session: int | None = None) -> list[Exchange]:
    out = []
    for s in range(sessions):
        lines = (
            DIALOGUE
            if per_session is None
            else [DIALOGUE[i % len(DIALOGUE)] for i in range(per_session)]
        )
        for i, (speaker, text) in enumerate(lines):
            out.append(
                Exchange(
                    namespace=ns,
                    session_id=f"s{s}",
                    seq=i,
                    exchange_id=f"s{s}:{i}",
                    session_date=datetime(2024, 3, 2 + s, 18, 0),
                    turns=[
                        Turn(
                            role=Role.user,
                            speaker=speaker,
                            content=f"{text} ({s}.{i})" if per_session else text,
                            turn_id=f"D{s}:{i}",
                        )
                    ],
                )
            )
    return out


async def ingest(settings, exchanges: list[Exchange]) -> None:  # type: ignore[no-untyped-def]
    async with MemoryClient(settings) as client:
        await client.add(exchanges)
        last: dict[tuple[str, str], int] = {}
        for ex in exchanges:
            last[(ex.namespace, ex.session_id)] = ex.seq
        for (ns, sid), seq in last.items():
            await client.end_session(ns, sid, after_seq=seq)
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=180)


def store(stack: Stack) -> EvidenceStore:
    name, dim = embedding_info(Settings())
    return EvidenceStore(stack.lancedb_uri, name, dim)


async def segments(stack: Stack, ns: str) -> list[Segment]:
    segs = [
        Segment.model_validate_json(v)
        for _, v, _ in await read_topic(stack.bootstrap, t.SEGMENTS, f"{ns}/")
    ]
    return sorted(segs, key=lambda s: (s.session_id, s.index))


async def test_pipeline_conversation_is_searchable_with_provenance(stack: Stack, settings) -> None:  # type: ignore[no-untyped-def]
    ns = f"prov-{uuid.uuid4().hex[:6]}"
    await ingest(settings, conversation(ns) + conversation(f"{ns}-other"))
    async with MemoryClient(settings) as client:
        reply = await client.search(ns, "What is the name of the sourdough starter?", k=3)
        top = reply.evidence[0]  # the answering turn's record, or the window around it
        assert top.turn_ids in (["D0:3"], ["D0:2", "D0:3", "D0:4"]) and top.session_id == "s0"
        assert top.date == datetime(2024, 3, 2, 18, 0)
        assert "Bubbles" in top.text
        assert {"rrf", "best", "route", "final"} <= set(top.scores)
        assert "second" not in top.scores  # no second stage unless a fitted one is named
        turns = [e for e in reply.evidence if e.kind == "turn"]
        assert all(e.speaker for e in turns)
        assert {"plan", "recall", "selection", "total"} <= set(reply.timings_ms)
        # tenant isolation: the other namespace holds the same words, and never shows up
        assert all(e.item_id.startswith(f"{ns}/") for e in reply.evidence)
        only_s0 = await client.search(ns, "half-marathon", k=10, session_id="s0")
        assert only_s0.evidence and all(e.session_id == "s0" for e in only_s0.evidence)
    segs = await segments(stack, ns)
    assert [tid for s in segs for tid in s.turn_ids] == [f"D0:{i}" for i in range(len(DIALOGUE))]


async def test_pipeline_replay_leaves_state_segments_and_rows_unchanged(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    ns = f"replay-{uuid.uuid4().hex[:6]}"
    exs = conversation(ns, sessions=2)
    await ingest(settings, exs)
    redis = Redis.from_url(stack.redis_url)
    keys = [f"lychee:seg:{{{ns}/s{i}}}:state" for i in range(2)]
    state_before = [await redis.hgetall(k) for k in keys]
    segs_before = await segments(stack, ns)
    rows_before = store(stack).count("turns", ns)
    await ingest(settings, exs)  # the very same exchanges and end_session messages again
    assert [await redis.hgetall(k) for k in keys] == state_before
    assert await segments(stack, ns) == segs_before
    assert store(stack).count("turns", ns) == rows_before == len(exs)
    await redis.aclose()


def _kill_and_restart_segmenter(stack: Stack) -> None:
    from tests.conftest import WORKER_ENV, wait_log

    for child in [c for c in stack.children if c.name == "segmenter"]:
        child.kill(signal.SIGKILL)
        assert child.proc is not None
        child.proc.wait(10)
        stack.children.remove(child)
    log = stack.data_dir / "logs" / "segmenter.log"
    log.rename(log.with_suffix(f".{time.time_ns()}.log"))
    stack.start_worker("segmenter", WORKER_ENV)
    wait_log(stack, "segmenter", "segmenter.ready")


async def test_pipeline_segmenter_sigkill_loses_no_exchange_and_duplicates_no_segment(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    ns = f"kill-{uuid.uuid4().hex[:6]}"
    exs = conversation(ns, sessions=4, per_session=60)
    async with MemoryClient(settings) as client, LagReader(settings.kafka.bootstrap) as lag:
        base = await lag.stage("segmenter")
        await client.add(exs)
        for i in range(4):
            await client.end_session(ns, f"s{i}", after_seq=59)
        await eventually(
            lambda: lag.stage("segmenter"),
            what="the segmenter mid-stream: a commit past the start, over 40 exchanges to go",
            until=lambda now: now.committed > base.committed and now.lag > 40,
            timeout_s=60,
        )
        killed_with_lag = (await lag.stage("segmenter")).lag
        _kill_and_restart_segmenter(stack)
        await lag.wait_drained(timeout_s=180)
    assert killed_with_lag > 0, "the kill should land while exchanges are still pending"
    assert store(stack).count("turns", ns) == len(exs)  # no exchange lost
    by_id: dict[str, list[Segment]] = defaultdict(list)
    for seg in await segments(stack, ns):
        by_id[seg.segment_id].append(seg)
    for copies in by_id.values():  # a redelivered segment is the same segment
        assert all(c == copies[0] for c in copies)
    seen = [(c[0].session_id, e.seq) for c in by_id.values() for e in c[0].exchanges]
    assert sorted(seen) == sorted(
        (e.session_id, e.seq) for e in exs
    )  # each exchange in exactly one segment


async def test_pipeline_malformed_input_goes_to_dlq_and_stage_keeps_running(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    ns = f"dlq-{uuid.uuid4().hex[:6]}"
    bad_exchange = orjson.dumps(
        {
            "namespace": "bad ns!",
            "session_id": "s0",
            "seq": 0,
            "exchange_id": "x",
            "turns": [{"role": "user", "content": "hi"}],
            "marker": ns,
        }
    )
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            t.EXCHANGES, b"{not json " + ns.encode(), key=f"{ns}/s0".encode()
        )
        await producer.send_and_wait(t.EXCHANGES, bad_exchange, key=f"{ns}/s0".encode())
        await producer.send_and_wait(
            t.TURNS, orjson.dumps({"namespace": ns, "marker": ns}), key=f"{ns}/s0".encode()
        )
    finally:
        await producer.stop()
    await ingest(settings, conversation(ns))  # good input after the bad keeps flowing
    assert store(stack).count("turns", ns) == len(DIALOGUE)
    dead = await read_topic(stack.bootstrap, t.dlq(t.EXCHANGES), f"{ns}/")
    assert [v for _, v, _ in dead] == [b"{not json " + ns.encode(), bad_exchange]  # original bytes
    assert dead[0][2]["error_type"] == b"json"
    assert dead[1][2]["error_type"] == b"schema" and b"namespace" in dead[1][2]["error"]
    assert dead[1][2]["source_topic"] == t.EXCHANGES.encode()
    dead_turns = await read_topic(stack.bootstrap, t.dlq(t.TURNS), f"{ns}/")
    assert len(dead_turns) == 1 and b"turn_id" in dead_turns[0][2]["error"]


async def test_query_bad_request_gets_an_error_reply_naming_the_field(stack: Stack) -> None:
    cid = uuid.uuid4().hex
    tp = TopicPartition(t.REPLIES, 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await consumer.start()
    await producer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        await consumer.position(tp)
        bad = {
            "correlation_id": cid,
            "namespace": "n1",
            "query": "x",
            "k": 0,
            "reply_partition": 0,
            "deadline_ms": int((time.time() + 30) * 1000),
        }
        await producer.send_and_wait(t.QUERIES, orjson.dumps(bad), key=b"n1")

        async def reply_to_cid() -> QueryReply | None:
            for recs in (await consumer.getmany(timeout_ms=500)).values():
                for r in recs:
                    if r.key == cid.encode():
                        return QueryReply.model_validate_json(r.value)
            return None

        reply = await eventually(
            reply_to_cid, what=f"the reply to {cid}", timeout_s=30, interval_s=0
        )
        assert reply.status == "error"
        assert (
            reply.error is not None
            and "k" in reply.error
            and "greater than or equal to 1" in reply.error
        )
    finally:
        await producer.stop()
        await consumer.stop()


async def test_query_sees_rows_written_after_it_opened_the_table(stack: Stack, settings) -> None:  # type: ignore[no-untyped-def]
    first, later = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("open", "later"))
    await ingest(settings, conversation(first))
    async with MemoryClient(settings) as client:
        assert (await client.search(first, "sourdough starter")).evidence  # table now open
        await ingest(settings, conversation(later))
        reply = await client.search(later, "sourdough starter")
        assert reply.evidence and all(e.item_id.startswith(f"{later}/") for e in reply.evidence)


def test_sync_client_add_flush_search(stack: Stack, settings) -> None:  # type: ignore[no-untyped-def]
    from streams.client import SyncMemoryClient

    ns = f"sync-{uuid.uuid4().hex[:6]}"
    with SyncMemoryClient(settings) as memory:
        assert memory.add(conversation(ns)) == len(DIALOGUE)
        memory.flush(ns, "s0", after_seq=len(DIALOGUE) - 1)
        memory.wait_indexed(ns, "s0", len(DIALOGUE) - 1)  # its raw turns searchable
        with pytest.raises(TimeoutError, match="not indexed up to seq 99 within 0.2 s"):
            memory.wait_indexed(ns, "s0", 99, timeout_s=0.2)
        asyncio.run(_drained(settings.kafka.bootstrap))  # and its segments
        reply = memory.search(ns, "bike repair shop job offer", k=2)
        # the answering turn first, alone or in its window
        assert "D0:6" in reply.evidence[0].turn_ids, [e.turn_ids for e in reply.evidence]


async def _drained(bootstrap: str) -> None:
    async with LagReader(bootstrap) as lag:
        await lag.wait_drained(timeout_s=120)
