"""`lychee bench fuzz`: hostile input on every input topic of a running stack, interleaved
with good exchanges and queries, through librdkafka (confluent-kafka) and aiokafka, with and
without compression.

Every bad message has an expected outcome: a dead letter whose `error_type` header names
the problem (the second of two exchanges given one `seq` among them), an error reply naming
the field, a logged drop (a deadline in the past), or acceptance (a null key, a gap in
`seq`, the first of two exchanges given one `seq`), the last checked in LanceDB. A message
whose outcome is missing counts as lost, and so does a good exchange that is not indexed or
a good query that is not answered.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from schemas import topics as t
from streams.bench.fuzz_cases import (
    ANSWERED,
    DEAD_LETTER,
    DROPPED,
    ERROR_REPLY,
    Generator,
    Message,
    dumps,
    exchange,
)
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.settings import Settings

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("aiokafka", "confluent")
BIG_BYTES = 64 * 1024 * 1024  # what the fuzzing producers may send (the stages accept 1 MiB)
STAGES = ("segmenter", "indexer", "encoder", "indexer-records", "query")


class Producers:
    """One aiokafka and one librdkafka producer per codec; every send returns where the
    record landed (partition, offset), which is how dead letters are matched to it."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.aio: dict[str, AIOKafkaProducer] = {}
        self.ck: dict[str, Any] = {}

    async def start(self) -> None:
        from confluent_kafka import Producer

        for codec in CODECS:
            p = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                compression_type=None if codec == "none" else codec,
                max_request_size=BIG_BYTES,
                request_timeout_ms=60_000,
            )
            await p.start()
            self.aio[codec] = p
            self.ck[codec] = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "compression.type": codec,
                    "message.max.bytes": BIG_BYTES,
                    "linger.ms": 5,
                    "log.connection.close": False,  # the broker closes idle connections: not news
                }
            )

    async def close(self) -> None:
        for p in self.aio.values():
            await p.stop()
        for ck in self.ck.values():
            await asyncio.to_thread(ck.flush, 30)

    async def send(self, msgs: list[Message]) -> None:
        """Send a round; per producer and partition, in list order. Crafted batches go
        through aiokafka's batch API with their bytes altered."""
        aio_futures = []
        for m in msgs:
            if m.crafted:
                m.client, m.codec = "aiokafka", "none"
                m.partition, m.offset = await self._crafted(m)
            elif m.client == "aiokafka":
                fut = await self.aio[m.codec].send(
                    m.topic, m.value, key=m.key, headers=m.headers or None
                )
                aio_futures.append((m, fut))
            else:
                self._produce_ck(m)
        for m, fut in aio_futures:
            md = await asyncio.wait_for(fut, 120)
            m.partition, m.offset = md.partition, md.offset
        for ck in self.ck.values():
            left = await asyncio.to_thread(ck.flush, 120)
            if left:
                raise RuntimeError(f"confluent-kafka could not deliver {left} messages")
        missing = [m.kind for m in msgs if m.offset < 0]
        if missing:
            raise RuntimeError(f"no delivery report for {missing[:5]}")

    def _produce_ck(self, m: Message) -> None:
        def delivered(err: Any, rec: Any) -> None:
            if err is None:
                m.partition, m.offset = rec.partition(), rec.offset()

        self.ck[m.codec].produce(
            m.topic, value=m.value, key=m.key, headers=m.headers or None, on_delivery=delivered
        )
        self.ck[m.codec].poll(0)

    async def _crafted(self, m: Message) -> tuple[int, int]:
        from aiokafka.record.util import calc_crc32c

        producer = self.aio["none"]
        partition = random.randrange(len(await producer.partitions_for(m.topic)))
        batch = producer.create_batch()
        batch.append(key=m.key, value=m.value, timestamp=None, headers=[("ZZZZ", b"x")])
        buf = bytearray(batch._build())  # noqa: SLF001 - the only way to alter a batch's bytes
        if m.crafted == "bad_header_key":
            i = buf.index(b"ZZZZ")
            buf[i : i + 4] = b"\xff\xfe\xff\xfe"
            struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))  # a valid CRC
        else:
            buf[-3] ^= 0xFF  # the value's bytes change, the CRC does not
        batch._buffer = bytes(buf)  # noqa: SLF001
        md = await (await producer.send_batch(batch, m.topic, partition=partition))
        return md.partition, md.offset


@dataclass
class FuzzReport:
    bad_sent: int = 0
    bad_by_kind: Counter[str] = field(default_factory=Counter)
    by_client: Counter[str] = field(default_factory=Counter)
    dead_lettered: int = 0
    dead_by_reason: Counter[str] = field(default_factory=Counter)
    dead_without_reason: int = 0
    error_replies: int = 0
    dropped: int = 0
    accepted_indexed: int = 0
    good_exchanges: int = 0
    good_indexed: int = 0
    good_queries: int = 0
    good_answered: int = 0
    lost: int = 0
    lost_examples: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    stages_alive: str = ""
    seconds: float = 0.0


def _good_exchange(ns: str, session: int, seq: int, rng: random.Random) -> bytes:
    words = ("river", "garden", "bread", "castle", "guitar", "museum", "ticket", "summer")
    text = f"Session {session} note {seq}: " + " ".join(rng.choice(words) for _ in range(12))
    return dumps(exchange(ns, f"s{session}", seq, text, f"g{session}-{seq}"))


def _good_query(ns: str, partitions: int, rng: random.Random) -> tuple[str, bytes]:
    cid = uuid.uuid4().hex
    data = {
        "correlation_id": cid,
        "namespace": ns,
        "query": "what about the garden?",
        "k": 3,
        "reply_partition": rng.randrange(partitions),
        "deadline_ms": int((time.time() + 300) * 1000),
    }
    return cid, dumps(data)


async def fuzz(
    settings: Settings,
    n: int,
    alive: Callable[[], dict[str, bool]],
    seed: int = 11,
    drain_timeout_s: float = 900.0,
) -> FuzzReport:
    """Send `n` bad messages (and as many good exchanges, plus good queries) and account
    for every one of them. `alive` reports which stage processes are running."""
    started = time.perf_counter()
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:6]
    producers = Producers(settings.kafka.bootstrap)
    await producers.start()
    try:
        parts = len(await producers.aio["none"].partitions_for(t.REPLIES))
        gen = Generator(run, parts, n, rng)
        sent, good_queries, good_count, ns_good = await _send_all(
            producers, gen, n, parts, rng, run
        )
    finally:
        await producers.close()
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(STAGES, timeout_s=drain_timeout_s)
    report = await _account(settings, sent, gen, good_queries, good_count, ns_good)
    report.stages_alive = ", ".join(f"{k}={'yes' if v else 'NO'}" for k, v in alive().items())
    report.seconds = time.perf_counter() - started
    return report


async def _send_all(
    producers: Producers, gen: Generator, n: int, parts: int, rng: random.Random, run: str
) -> tuple[list[Message], dict[str, str], int, str]:
    """Rounds of bad and good messages through rotating clients and codecs; each good
    session sticks to one producer so that its seq order holds."""
    ns_good = f"fuzz-good-{run}"
    sessions = 8
    seqs = [0] * sessions
    sent: list[Message] = []
    good_queries: dict[str, str] = {}
    good_count = 0
    bad_iter = iter(gen)
    round_: list[Message] = []
    for i in range(n):
        for m in _take_one(bad_iter):
            m.client = CLIENTS[i % 2]
            m.codec = CODECS[(i // 2) % len(CODECS)]
            if m.kind == "both_null":
                m.client = "confluent"  # aiokafka refuses a record with neither key nor value
            round_.append(m)
            sent.append(m)
        s = i % sessions
        good = Message(
            "good",
            t.EXCHANGES,
            f"{ns_good}/s{s}".encode(),
            _good_exchange(ns_good, s, seqs[s], rng),
            "good",
            headers=[("trace", b"\x00\xff")] if i % 3 == 0 else [],
            client=CLIENTS[s % 2],
            codec=CODECS[s % len(CODECS)],
        )
        seqs[s] += 1
        good_count += 1
        round_.append(good)
        if i % 20 == 0:
            cid, value = _good_query(ns_good, parts, rng)
            good_queries[cid] = ns_good
            round_.append(
                Message(
                    "good_query",
                    t.QUERIES,
                    ns_good.encode(),
                    value,
                    "answered",
                    client=CLIENTS[(i // 20) % 2],
                    codec=CODECS[(i // 40) % len(CODECS)],
                )
            )
        if len(round_) >= 100 or i == n - 1:
            await producers.send(round_)
            round_ = []
    # close every good session so the last segments reach the encoder and indexer
    closing = [
        Message(
            "good_end",
            t.EXCHANGES,
            f"{ns_good}/s{s}".encode(),
            dumps(
                {
                    "kind": "end_session",
                    "namespace": ns_good,
                    "session_id": f"s{s}",
                    "after_seq": seqs[s] - 1,
                }
            ),
            "good",
            client=CLIENTS[s % 2],
            codec=CODECS[s % len(CODECS)],
        )
        for s in range(sessions)
        if seqs[s]
    ]
    await producers.send(closing)
    return sent, good_queries, good_count, ns_good


def _take_one(it: Iterator[Message]) -> list[Message]:
    """The next bad message, with the messages that go with it (the pair of a duplicate or
    gapped seq, the rest of a burst)."""
    out = [next(it)]
    while out[-1].kind.endswith(".first") or out[-1].burst:
        out.append(next(it))
    return out


async def _account(
    settings: Settings,
    sent: list[Message],
    gen: Generator,
    good_queries: dict[str, str],
    good_count: int,
    ns_good: str,
) -> FuzzReport:
    from streams.factories import open_store

    report = FuzzReport(good_exchanges=good_count, good_queries=len(good_queries))
    dead: dict[tuple[str, int, int], dict[str, bytes]] = {}
    sources = {m.topic for m in sent}
    for topic in sources:
        for _, _, headers in await read_topic(settings.kafka.bootstrap, t.dlq(topic)):
            src = headers.get("source_topic", b"").decode(errors="replace")
            try:
                where = (src, int(headers["source_partition"]), int(headers["source_offset"]))
            except (KeyError, ValueError):
                continue
            dead[where] = headers
    replies: dict[str, dict[str, Any]] = {}
    for key, value, _ in await read_topic(settings.kafka.bootstrap, t.REPLIES):
        if key is not None and value:
            replies[key.decode(errors="replace")] = orjson.loads(value)
    bad = [m for m in sent if not m.kind.endswith(".first")]
    report.bad_sent = len(bad)
    for m in bad:
        report.bad_by_kind[m.kind] += 1
        report.by_client[f"{m.client}/{m.codec}"] += 1
        _judge(report, m, dead, replies)
    store = open_store(settings)
    indexed = {ns: store.count("turns", ns) for ns in gen.expected_turns}
    for ns, want in gen.expected_turns.items():
        got = indexed.get(ns, 0)
        report.accepted_indexed += min(got, want)
        if got != want:
            _lose(report, f"{ns}: {got} turns indexed, {want} expected")
    report.good_indexed = store.count("turns", ns_good)
    if report.good_indexed != good_count:
        report.lost += abs(good_count - report.good_indexed)
        report.lost_examples.append(f"good exchanges: {report.good_indexed}/{good_count} indexed")
    for cid in good_queries:
        reply = replies.get(cid)
        if reply is not None and reply.get("status") == "ok":
            report.good_answered += 1
        else:
            _lose(report, f"good query {cid}: {reply and reply.get('error')}")
    return report


def _judge(
    report: FuzzReport,
    m: Message,
    dead: dict[tuple[str, int, int], dict[str, bytes]],
    replies: dict[str, dict[str, Any]],
) -> None:
    headers = dead.get((m.topic, m.partition, m.offset))
    reply = replies.get(m.correlation_id) if m.correlation_id else None
    if headers is not None:
        report.dead_lettered += 1
        code = headers.get("error_type", b"").decode(errors="replace")
        report.dead_by_reason[code or "(none)"] += 1
        if not code or not headers.get("error"):
            report.dead_without_reason += 1
    if m.expect == ERROR_REPLY and reply is not None and reply.get("status") == "error":
        report.error_replies += 1
    if m.expect == DROPPED:
        report.dropped += 1
    where = f"{m.kind} ({m.client}/{m.codec}) at {m.topic}[{m.partition}]@{m.offset}"
    missing, wrong = _verdict(m, headers, reply)
    if missing:
        _lose(report, f"{where}: {missing}")
    if wrong:
        report.mismatched.append(f"{where}: {wrong}")


def _verdict(
    m: Message, headers: dict[str, bytes] | None, reply: dict[str, Any] | None
) -> tuple[str, str]:
    """(what is missing, what is unexpected) about one bad message's outcome."""
    code = (headers or {}).get("error_type", b"").decode(errors="replace")
    if m.expect == DEAD_LETTER:
        if headers is None:
            return "no dead letter", ""
        return "", "" if code == m.reason else f"dead letter {code!r}, expected {m.reason!r}"
    if m.expect == ERROR_REPLY:
        if reply is None or reply.get("status") != "error":
            return f"no error reply ({'a dead letter' if headers else 'nothing'})", ""
        error = reply.get("error") or ""
        return "", "" if m.reason in error else f"error reply {error[:200]!r} names no {m.reason!r}"
    if m.expect == ANSWERED:
        if reply is None or reply.get("status") != "ok":
            return f"not answered ({reply and reply.get('error')})", ""
        return "", ""
    if m.expect == DROPPED:
        return "", "" if reply is None and headers is None else "a reply or dead letter"
    return "", f"dead-lettered ({code!r})" if headers is not None else ""


def _lose(report: FuzzReport, what: str) -> None:
    report.lost += 1
    if len(report.lost_examples) < 20:
        report.lost_examples.append(what)


def format_report(r: FuzzReport) -> str:
    lines = [
        f"bad sent:              {r.bad_sent} ({len(r.bad_by_kind)} kinds; "
        + ", ".join(f"{k}={v}" for k, v in sorted(r.by_client.items()))
        + ")",
        f"dead-lettered:         {r.dead_lettered} (without a reason header: {r.dead_without_reason})",
    ]
    lines += [f"  {code:<20} {count}" for code, count in r.dead_by_reason.most_common()]
    lines += [
        f"error replies:         {r.error_replies} (each naming the field)",
        f"dropped (deadline past, logged): {r.dropped}",
        f"accepted as expected (null key, seq gap, the first of a seq given twice): {r.accepted_indexed} turns",
        f"good exchanges indexed: {r.good_indexed}/{r.good_exchanges}",
        f"good queries answered:  {r.good_answered}/{r.good_queries}",
        f"lost:                  {r.lost}",
        f"unexpected outcomes:   {len(r.mismatched)}",
        f"stages alive:          {r.stages_alive}",
        f"time:                  {r.seconds:.1f}s",
    ]
    lines += [f"  lost: {x}" for x in r.lost_examples]
    lines += [f"  unexpected: {x}" for x in r.mismatched[:20]]
    lines.append(
        "bad messages by kind: " + ", ".join(f"{k}={v}" for k, v in sorted(r.bad_by_kind.items()))
    )
    return "\n".join(lines)


def run_fuzz(n: int, seed: int = 11) -> FuzzReport:
    """`lychee bench fuzz`: the embedded stack in a temporary directory, every stage."""
    import shutil
    import tempfile
    from pathlib import Path

    from streams.stack.embedded import Stack
    from streams.stack.ready import launch, wait_ready

    stack = Stack(Path(tempfile.mkdtemp(prefix="lychee-fuzz-")))
    try:
        settings = launch(stack)
        asyncio.run(wait_ready(stack, settings, timeout_s=300))

        def alive() -> dict[str, bool]:
            return {c.name: c.alive for c in stack.children}

        report = asyncio.run(fuzz(settings, n, alive, seed))
    finally:
        stack.stop()
        shutil.rmtree(stack.data_dir, ignore_errors=True)
    return report
