"""Forget end to end: real broker, Redis, LanceDB and worker processes (issue 12)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from schemas import Exchange, Role, Turn
from schemas.control import FORGET_STAGES
from streams.client import MemoryClient
from streams.factories import embedding_info
from streams.kafka.lag import LagReader
from streams.settings import Settings
from streams.stack.embedded import Stack
from tests.bytescan import files_holding
from tests.waiting import eventually
from workers.errors import read_pruned
from workers.store import LINKS, NODES, RECORDS, SEGMENTS, TURNS, EvidenceStore

pytestmark = pytest.mark.integration

LINES = [
    "My cousin {m} restores old sailing boats down at the harbour.",
    "Last spring {m} sailed one of them all the way to the northern islands.",
    "I promised to help {m} paint the hull of the blue boat in June.",
    "Also, the village bakery sells a rye loaf they call the {m} special.",
]


def exchanges(ns: str, session: str, marker: str, first_seq: int = 0) -> list[Exchange]:
    return [
        Exchange(
            namespace=ns,
            session_id=session,
            seq=first_seq + i,
            exchange_id=f"{session}:{first_seq + i}",
            session_date=datetime(2024, 5, 2, 18, 0),
            turns=[Turn(role=Role.user, speaker="Ann", content=line.format(m=marker))],
        )
        for i, line in enumerate(LINES)
    ]


def marker() -> str:
    return "zq" + uuid.uuid4().hex[:10]


async def ingest(settings: Any, exs: list[Exchange], end: bool = True) -> None:
    async with MemoryClient(settings) as client:
        await client.add(exs)
        if end:
            last: dict[tuple[str, str], int] = {}
            for ex in exs:
                last[(ex.namespace, ex.session_id)] = ex.seq
            for (ns, sid), seq in last.items():
                await client.end_session(ns, sid, after_seq=seq)
    await drained(settings)


async def drained(settings: Any) -> None:
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=180)


def open_store(stack: Stack) -> EvidenceStore:
    name, dim = embedding_info(Settings())
    return EvidenceStore(stack.lancedb_uri, name, dim)


def rows(stack: Stack, ns: str) -> dict[str, list[dict[str, Any]]]:
    """The namespace's rows in every table; read again when the indexer's forget pruned the
    version a read was on (as the query service does)."""
    for attempt in range(3):
        try:
            return read_rows(open_store(stack), ns)
        except RuntimeError as exc:
            if not read_pruned(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def read_rows(store: EvidenceStore, ns: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for name in (TURNS, RECORDS, NODES, SEGMENTS, LINKS):
        tbl = store.table(name)
        data = [] if tbl is None else tbl.to_arrow().to_pylist()
        out[name] = sorted((r for r in data if r["namespace"] == ns), key=lambda r: r["id"])
    return out


async def keys_naming(redis: Redis, name: str) -> list[str]:
    out = []
    async for key in redis.scan_iter(count=1000):
        text = key.decode(errors="replace")
        if name in text:
            out.append(text)
        if text in ("lychee:seg:active", "lychee:seg:pending"):
            members = await redis.zrange(text, 0, -1)
            out += [f"{text} -> {m.decode()}" for m in members if name.encode() in m]
    return out


@asynccontextmanager
async def aof(redis: Redis) -> AsyncIterator[Path]:
    """The stack's Redis with an append-only file for the test (the shared test stack runs
    without one); the file's path."""
    await redis.config_set("appendonly", "yes")
    try:
        await eventually(  # turning AOF on starts a rewrite; wait for it
            lambda: redis.info("persistence"),
            what="the AOF rewrite done",
            until=lambda info: (
                not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]
            ),
            timeout_s=30,
        )
        conf = await redis.config_get("dir")
        name = (await redis.config_get("appendfilename"))["appendfilename"]
        yield Path(conf["dir"]) / name
    finally:
        await redis.config_set("appendonly", "no")


def under_way(client: MemoryClient) -> Any:
    """The client's one forget under way (its stages' receipts, as they come in), if any."""
    return next(iter(client._forgets.values()), None)


@contextmanager
def paused(stack: Stack, stage: str) -> Iterator[None]:
    """SIGSTOP a worker (shorter than its group session), SIGCONT it whatever happens."""
    procs = [c.proc for c in stack.children if c.name == stage and c.proc is not None]
    for p in procs:
        p.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for p in procs:
            p.send_signal(signal.SIGCONT)


async def test_forget_namespace_removes_it_everywhere_and_leaves_the_other(
    stack: Stack, settings: Any
) -> None:
    ns_a, ns_b = f"fa-{uuid.uuid4().hex[:6]}", f"fb-{uuid.uuid4().hex[:6]}"
    m_a, m_b = marker(), marker()
    redis = Redis.from_url(stack.redis_url)
    try:
        async with aof(redis) as aof_file:
            await ingest(
                settings,
                exchanges(ns_a, "s0", m_a)
                + exchanges(ns_b, "s0", m_b)
                + exchanges(ns_a, "s1", m_a),
            )
            before_a = rows(stack, ns_a)
            before_b = rows(stack, ns_b)
            assert before_a[RECORDS] and before_a[TURNS] and before_a[NODES] and before_a[SEGMENTS]
            lance = Path(stack.lancedb_uri)
            assert files_holding(lance, [m_a])  # the scan sees what it must not see later
            assert await keys_naming(redis, ns_a)
            async with MemoryClient(settings) as client:
                assert (await client.search(ns_a, "who restores sailing boats?")).evidence

                receipt = await client.forget(ns_a)

                assert set(receipt.stages) == {"segmenter", "encoder", "indexer"}
                assert receipt.rows_removed == {
                    n: len(before_a[n]) for n in (TURNS, RECORDS, NODES, SEGMENTS, LINKS)
                }
                assert receipt.redis_keys_removed > 0 and receipt.versions_pruned > 0
                assert (await client.search(ns_a, "who restores sailing boats?")).evidence == []
                assert (await client.search(ns_b, "who restores sailing boats?")).evidence
            assert rows(stack, ns_a) == {TURNS: [], RECORDS: [], NODES: [], SEGMENTS: [], LINKS: []}
            assert rows(stack, ns_b) == before_b
            assert await keys_naming(redis, ns_a) == []
            assert await keys_naming(redis, ns_b)
            assert files_holding(lance, [m_a]) == []
            assert m_a.encode() not in aof_file.read_bytes()
            assert files_holding(lance, [m_b])  # the other namespace's text is still seen
    finally:
        await redis.aclose()


async def test_forget_session_removes_only_that_session(stack: Stack, settings: Any) -> None:
    ns = f"fs-{uuid.uuid4().hex[:6]}"
    m_gone, m_kept = marker(), marker()
    await ingest(settings, exchanges(ns, "s0", m_gone) + exchanges(ns, "s1", m_kept))
    before = rows(stack, ns)
    assert any(m_gone in r["text"] for r in before[TURNS])
    redis = Redis.from_url(stack.redis_url)
    try:
        async with MemoryClient(settings) as client:
            receipt = await client.forget(ns, "s0")
        assert receipt.rows_removed[TURNS] == len(LINES)
        after = rows(stack, ns)
        assert {r["session_id"] for r in after[TURNS]} == {"s1"}
        assert {r["session_id"] for r in after[SEGMENTS]} == {"s1"}
        assert len(after[TURNS]) == len(LINES)
        assert after[RECORDS] and all(m_gone not in r["semantic_text"] for r in after[RECORDS])
        assert all(r["source_session"] != "s0" for r in after[RECORDS])
        assert all(m_gone not in r["text"] for r in after[NODES])
        assert await keys_naming(redis, f"{ns}/s0") == []
        assert await keys_naming(redis, f"{ns}/s1")
        assert files_holding(Path(stack.lancedb_uri), [m_gone]) == []
        assert files_holding(Path(stack.lancedb_uri), [m_kept])
    finally:
        await redis.aclose()


@pytest.mark.parametrize("stage", ["segmenter", "indexer"])
async def test_forget_exchanges_sent_before_are_not_resurrected_and_later_ones_are_ingested(
    stack: Stack, settings: Any, stage: str
) -> None:
    """Exchanges acked before the forget but consumed after it (the segmenter paused), or
    their turns consumed after it (the indexer paused), leave nothing; exchanges sent after
    the forget, while the paused stage had not seen it yet (it meets them and the forget in
    either order), and after the forget returned are ingested."""
    ns = f"fr-{uuid.uuid4().hex[:6]}"
    m_old, m_early, m_new = marker(), marker(), marker()
    async with MemoryClient(settings) as client:
        with paused(stack, stage):
            await client.add(exchanges(ns, "s0", m_old))
            await client.end_session(ns, "s0", after_seq=len(LINES) - 1)
            forget = asyncio.create_task(client.forget(ns))
            others = set(FORGET_STAGES) - {stage}
            wait = await eventually(
                lambda: under_way(client),
                what=f"the forget's receipts of {sorted(others)}",
                until=lambda w: w is not None and others <= w.parts.keys(),
                timeout_s=120,
            )
            assert stage not in wait.parts and not wait.done.is_set() and not forget.done(), (
                "the forget must wait for the paused stage's receipt"
            )
            await client.add(exchanges(ns, "s1", m_early))  # sent after the forget
            await client.end_session(ns, "s1", after_seq=len(LINES) - 1)
        receipt = await forget
        assert set(receipt.stages) == {"segmenter", "encoder", "indexer"}
        await drained(settings)
        early = rows(stack, ns)
        assert len(early[TURNS]) == len(LINES) and all(m_early in r["text"] for r in early[TURNS])
        assert early[RECORDS] and all(m_old not in r["semantic_text"] for r in early[RECORDS])
        assert files_holding(Path(stack.lancedb_uri), [m_old]) == []

        await client.add(exchanges(ns, "s0", m_new, first_seq=0))
        await client.end_session(ns, "s0", after_seq=len(LINES) - 1)
    await drained(settings)
    after = rows(stack, ns)
    assert sorted(m for r in after[TURNS] for m in (m_early, m_new) if m in r["text"]) == sorted(
        [m_early] * len(LINES) + [m_new] * len(LINES)
    )
    assert after[RECORDS] and not any(m_old in r["semantic_text"] for r in after[RECORDS])


async def test_forget_from_a_foreign_client_past_the_logs_end_fences_only_what_was_sent(
    stack: Stack, settings: Any
) -> None:
    """A forget whose end offsets lie past `memory.exchanges`' end (a client we did not write:
    2^63 - 1 on every partition) and whose receipts have no partition to go to: what was sent
    before it is forgotten, what is sent after it is ingested, and it is no dead letter."""
    from aiokafka import AIOKafkaProducer

    from schemas import ForgetRequest
    from schemas import topics as t
    from schemas.base import MAX_INT64
    from streams.kafka.reader import read_topic
    from streams.kafka.serde import encode

    ns = f"fx-{uuid.uuid4().hex[:6]}"
    m_old, m_new = marker(), marker()
    await ingest(settings, exchanges(ns, "s0", m_old))
    async with LagReader(settings.kafka.bootstrap) as lag:
        parts = (await lag.end_offsets(t.EXCHANGES)).keys()
    req = ForgetRequest(
        forget_id=f"foreign-{ns}",
        namespace=ns,
        exchanges_end={tp.partition: MAX_INT64 for tp in parts},
        reply_partition=999_999,
        requested_at=datetime(2024, 1, 1),
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(t.CONTROL, encode(req), key=ns.encode())
    finally:
        await producer.stop()
    await eventually(
        lambda: rows(stack, ns)[TURNS],
        what="the forget applied",
        until=lambda r: not r,
        timeout_s=120,
    )
    await ingest(settings, exchanges(ns, "s1", m_new))
    after = rows(stack, ns)
    assert sum(m_new in r["text"] for r in after[TURNS]) == len(LINES)
    letters = await read_topic(settings.kafka.bootstrap, t.dlq(t.CONTROL), None)
    assert not [v for _, v, _ in letters if v and req.forget_id.encode() in v]
