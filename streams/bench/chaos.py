"""`lychee bench chaos`: ingest while the stack is killed with SIGKILL and restarted.

A stack of its own (durable by default: broker storage on SeaweedFS, Redis fsync always)
runs `processes` workers of each ingest stage (segmenter, encoder, indexer) with the offline
encoder. The conversation is first ingested undisturbed, twice, each time in a namespace of
its own: their record sets give the noise floor (MiniLM vectors, and so segment boundaries,
vary slightly with batch composition). Then it is ingested again while, every `interval_s`,
a random worker is killed -9 and restarted a moment later, the kills going on while the lag
drains; on the durable stack Redis is killed -9 once (a third of the way) and the broker
once (two thirds), each restarted on its data. The report shows what a loss or a duplicate
would: produced against indexed turns, duplicate rows, exchanges in no segment or in two,
segments encoded (log lines) against distinct segments and against the token counter,
record batches per segment, the record-set Jaccard against the undisturbed runs, dead
letters, time to drain.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson
from redis.asyncio import Redis

from schemas import Exchange, Role, Segment, Turn
from schemas import topics as t
from streams.bench.harness import renamed
from streams.client import MemoryClient
from streams.factories import embedding_info
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from streams.stack.embedded import DURABLE, EPHEMERAL, Child, Stack
from workers.encoder.service import read_usage
from workers.store import EvidenceStore, namespace_filter

STAGES = ("segmenter", "encoder", "indexer")
READY = {stage: f"{stage}.ready" for stage in STAGES}
PARTITIONS = 4

# Invented people and places only.
_LINES = [
    ("Odile", "I booked the ferry to Vennholm for the harvest festival in June."),
    ("Bram", "Is Kasimir coming with you to Vennholm this time?"),
    ("Odile", "Kasimir is bringing his accordion and the plum jam he made."),
    ("Bram", "I repaired the old tandem bicycle so we can ride around Vennholm."),
    ("Odile", "The festival opens with a lantern parade along the harbour."),
    ("Bram", "My sister Yelka wants to sell her woven baskets at the market."),
    ("Odile", "Yelka's baskets sold out last year before noon."),
    ("Bram", "I will bake rye bread for the picnic on the cliffs."),
]


def synthetic(ns: str, sessions: int = 8, per_session: int = 40) -> list[Exchange]:
    return [
        Exchange(
            namespace=ns,
            session_id=f"s{s}",
            seq=i,
            exchange_id=f"s{s}:{i}",
            session_date=datetime(2024, 5, 1 + s % 28, 9, 0),
            turns=[
                Turn(
                    role=Role.user,
                    speaker=_LINES[(i + s) % len(_LINES)][0],
                    content=f"{_LINES[(i + s) % len(_LINES)][1]} ({s}.{i})",
                    turn_id=f"D{s}:{i}",
                )
            ],
        )
        for s in range(sessions)
        for i in range(per_session)
    ]


@dataclass
class ChaosReport:
    stack: str = ""
    processes: int = 0
    kills: int = 0
    infra_kills: int = 0
    produced_turns: int = 0
    indexed_turns: int = 0
    duplicate_turn_rows: int = 0
    duplicate_record_rows: int = 0
    distinct_segments: int = 0
    exchanges_in_no_segment: int = 0
    exchanges_in_two_segments: int = 0
    segments_encoded: int = 0  # "segment.encoded" lines: encodes that stored their batch
    segments_counted: int = 0  # the token counter's segment count
    segments_with_records: int = 0
    record_batches_differing: int = 0  # segments published with two different record sets
    dead_letters: int = 0
    seconds_to_drain: float = 0.0
    jaccard_vs_undisturbed: float | None = None  # record texts: disturbed run vs first clean one
    jaccard_noise_floor: float | None = None  # record texts: the two clean runs
    records: tuple[int, ...] = ()  # distinct record texts: clean runs, then the disturbed one
    kill_log: list[str] = field(default_factory=list)


def run_chaos(
    exchanges: list[Exchange],
    kills: int = 20,
    processes: int = 2,
    interval_s: float = 4.0,
    restart_after_s: float = 1.0,
    seed: int = 7,
    timeout_s: float = 1800.0,
    durable: bool = True,
    undisturbed: int = 2,
) -> ChaosReport:
    preset = DURABLE if durable else EPHEMERAL
    stack = Stack(Path(tempfile.mkdtemp(prefix="lychee-chaos-")), preset=preset)
    env = {
        "LYCHEE_TOPIC_PARTITIONS": str(PARTITIONS),
        "LYCHEE_SEGMENTER_BATCH_SIZE": "8",
        "LYCHEE_LOG_LEVEL": "INFO",
        "LYCHEE_SESSION_TIMEOUT_S": "6",
    }
    base = exchanges[0].namespace
    try:
        stack.start_infra()
        asyncio.run(ensure_topics(stack.bootstrap, PARTITIONS))
        workers: dict[str, Child] = {}
        for stage in STAGES:
            for i in range(processes):
                name = f"{stage}-{i}"
                workers[name] = _start(stack, name, stage, env)
        for name, child in workers.items():
            _wait_line(stack, name, READY[name.rsplit("-", 1)[0]], child, 600)
        report = ChaosReport(stack=preset.name, processes=processes)
        clean = [
            asyncio.run(_ingest_clean(stack, renamed(exchanges, f"{base}-u{i}"), timeout_s))
            for i in range(undisturbed)
        ]
        chaos = renamed(exchanges, f"{base}-c")
        stop = threading.Event()
        infra = ("redis", "broker") if durable else ()
        killer = threading.Thread(
            target=_kill_loop,
            args=(
                stack,
                workers,
                env,
                kills,
                interval_s,
                restart_after_s,
                seed,
                stop,
                report,
                infra,
            ),
            daemon=True,
        )
        killer.start()
        try:
            asyncio.run(_ingest_and_measure(stack, chaos, report, killer, timeout_s))
        finally:
            stop.set()
            killer.join(60)
        texts = _record_texts(stack, chaos[0].namespace)
        report.records = (*(len(c) for c in clean), len(texts))
        if clean:
            report.jaccard_vs_undisturbed = jaccard(texts, clean[0])
        if len(clean) > 1:
            report.jaccard_noise_floor = jaccard(clean[0], clean[1])
        return report
    finally:
        stack.stop(grace_s=5)
        shutil.rmtree(stack.data_dir, ignore_errors=True)


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


async def _ingest_clean(stack: Stack, exchanges: list[Exchange], timeout_s: float) -> set[str]:
    """An undisturbed ingest of `exchanges`; its record texts once everything is drained."""
    await _produce(stack, exchanges)
    async with LagReader(stack.bootstrap) as lag:
        await lag.wait_drained(timeout_s=timeout_s)
    return await asyncio.to_thread(_record_texts, stack, exchanges[0].namespace)


def _record_texts(stack: Stack, ns: str) -> set[str]:
    store = _store(stack)
    tbl = store.table("records")
    if tbl is None:
        return set()
    rows = (
        tbl.search().where(namespace_filter(ns)).select(["normalized_text"]).limit(None).to_arrow()
    )
    return set(rows.column("normalized_text").to_pylist())


def _start(stack: Stack, name: str, stage: str, env: dict[str, str]) -> Child:
    child = stack.child(name, ["worker", stage], env)
    child.start()
    stack.children.append(child)
    return child


def _wait_line(stack: Stack, name: str, text: str, child: Child, timeout_s: float) -> None:
    log = stack.logs / f"{name}.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if not child.alive:
            raise RuntimeError(f"{name} exited before it was ready; see {log}")
        time.sleep(0.5)
    raise TimeoutError(f"{name} not ready after {timeout_s:.0f}s; see {log}")


def _kill_loop(
    stack: Stack,
    workers: dict[str, Child],
    env: dict[str, str],
    kills: int,
    interval_s: float,
    restart_after_s: float,
    seed: int,
    stop: threading.Event,
    report: ChaosReport,
    infra: tuple[str, ...],
) -> None:
    """`kills` worker kills; the infrastructure processes in `infra` are each killed once
    along the way (evenly spaced), restarted at once on their data."""
    rng = random.Random(seed)
    due = [(kills * (i + 1) / (len(infra) + 1), name) for i, name in enumerate(infra)]
    while report.kills < kills and not stop.wait(interval_s * rng.uniform(0.5, 1.5)):
        if due and report.kills >= due[0][0]:
            name = due.pop(0)[1]
            stack.crash_and_restart(name)
            report.infra_kills += 1
            report.kill_log.append(f"{time.strftime('%H:%M:%S')} kill -9 {name}, restarted")
            continue
        name = rng.choice(sorted(workers))
        child = workers[name]
        child.kill(signal.SIGKILL)
        if child.proc is not None:
            child.proc.wait(10)
        stack.children.remove(child)
        report.kills += 1
        report.kill_log.append(f"{time.strftime('%H:%M:%S')} kill -9 {name}")
        stop.wait(restart_after_s)
        workers[name] = _start(stack, name, name.rsplit("-", 1)[0], env)


async def _ingest_and_measure(
    stack: Stack,
    exchanges: list[Exchange],
    report: ChaosReport,
    killer: threading.Thread,
    timeout_s: float,
) -> None:
    ns = exchanges[0].namespace
    started = time.monotonic()
    await _produce(stack, exchanges)
    async with LagReader(stack.bootstrap) as lag:
        while killer.is_alive():  # kills go on while the lag drains
            await asyncio.sleep(1.0)
            if time.monotonic() - started > timeout_s:
                break
        await lag.wait_drained(timeout_s=max(60.0, timeout_s - (time.monotonic() - started)))
    report.seconds_to_drain = time.monotonic() - started
    report.produced_turns = sum(len(e.turns) for e in exchanges)
    await _measure(stack, ns, exchanges, report)


async def _produce(stack: Stack, exchanges: list[Exchange]) -> None:
    """The exchanges, then an end of session after each session's last one."""
    ns = exchanges[0].namespace
    async with MemoryClient(stack.settings()) as client:
        await client.add(exchanges)
        last: dict[str, int] = {}
        for ex in exchanges:
            last[ex.session_id] = max(ex.seq, last.get(ex.session_id, -1))
        for sid, seq in last.items():
            await client.end_session(ns, sid, after_seq=seq)


def _store(stack: Stack) -> EvidenceStore:
    model, dim = embedding_info(Settings.load(None))  # as the stack's workers embed
    return EvidenceStore(stack.lancedb_uri, model, dim)


async def _measure(stack: Stack, ns: str, exchanges: list[Exchange], report: ChaosReport) -> None:
    store = _store(stack)
    for name, attr in (("turns", "duplicate_turn_rows"), ("records", "duplicate_record_rows")):
        tbl = store.table(name)
        ids = (
            []
            if tbl is None
            else (
                tbl.search()
                .where(namespace_filter(ns))
                .select(["id"])
                .limit(None)
                .to_arrow()
                .column("id")
                .to_pylist()
            )
        )
        setattr(report, attr, len(ids) - len(set(ids)))
        if name == "turns":
            report.indexed_turns = len(set(ids))
    segments: dict[str, Segment] = {}
    for _, value, _ in await read_topic(stack.bootstrap, t.SEGMENTS, f"{ns}/"):
        if value:
            seg = Segment.model_validate_json(value)
            segments[seg.segment_id] = seg
    report.distinct_segments = len(segments)
    where: dict[tuple[str, int], int] = Counter(
        (s.session_id, e.seq) for s in segments.values() for e in s.exchanges
    )
    produced = {(e.session_id, e.seq) for e in exchanges}
    report.exchanges_in_no_segment = len(produced - set(where))
    report.exchanges_in_two_segments = sum(1 for n in where.values() if n > 1)
    batches: dict[str, set[bytes]] = defaultdict(set)
    for _, value, _ in await read_topic(stack.bootstrap, t.RECORDS, key=ns):
        if value:
            batch = orjson.loads(value)
            batches[batch["segment_id"]].add(orjson.dumps(batch["records"]))
    report.segments_with_records = len(batches)
    report.record_batches_differing = sum(1 for v in batches.values() if len(v) > 1)
    report.segments_encoded = sum(
        1
        for p in stack.logs.glob("encoder-*.log")
        for line in p.read_text(errors="replace").splitlines()
        if '"segment.encoded"' in line and f"{ns}/" in line
    )
    redis = Redis.from_url(stack.redis_url)
    try:
        report.segments_counted = (await read_usage(redis, ns)).get(ns, {}).get("segments", 0)
    finally:
        await redis.aclose()
    for topic in (t.EXCHANGES, t.TURNS, t.SEGMENTS):
        report.dead_letters += len(await read_topic(stack.bootstrap, t.dlq(topic), f"{ns}/"))
    report.dead_letters += len(await read_topic(stack.bootstrap, t.dlq(t.RECORDS), key=ns))


def format_report(r: ChaosReport) -> str:
    return "\n".join(
        [
            f"stack:                        {r.stack}",
            f"processes per ingest stage:   {r.processes}",
            f"kills (SIGKILL + restart):    {r.kills} workers, {r.infra_kills} of Redis/broker",
            f"produced turns:               {r.produced_turns}",
            f"indexed turns:                {r.indexed_turns} (lost: {r.produced_turns - r.indexed_turns})",
            f"duplicate rows:               turns {r.duplicate_turn_rows}, records {r.duplicate_record_rows}",
            f"distinct segments:            {r.distinct_segments}",
            f"exchanges in no segment:      {r.exchanges_in_no_segment}",
            f"exchanges in two segments:    {r.exchanges_in_two_segments}",
            f"segments encoded (stored):    {r.segments_encoded} (counter: {r.segments_counted})",
            f"segments with records:        {r.segments_with_records} "
            f"(published with different record sets: {r.record_batches_differing})",
            f"record texts:                 {' / '.join(map(str, r.records))} "
            "(undisturbed runs, then the disturbed one)",
            f"record-set Jaccard:           {_j(r.jaccard_vs_undisturbed)} vs undisturbed; "
            f"noise floor (two undisturbed runs) {_j(r.jaccard_noise_floor)}",
            f"dead letters:                 {r.dead_letters}",
            f"time to drain:                {r.seconds_to_drain:.1f}s",
        ]
    )


def _j(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
