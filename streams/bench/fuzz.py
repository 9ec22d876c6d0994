"""`lychee bench fuzz`: hostile input on every input topic of a running stack, interleaved
with good exchanges and queries, through librdkafka (confluent-kafka) and aiokafka, with and
without compression.

Every bad message has an expected outcome: a dead letter whose `error_type` header names
the problem, an error reply naming the field, a logged drop (a deadline in the past), or
acceptance (a null key, a gap in `seq`) or fencing (a replayed `seq`), the last two checked
in LanceDB. A message whose outcome is missing counts as lost, and so does a good exchange
that is not indexed or a good query that is not answered.
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
from streams.lag import LagReader
from streams.reader import read_topic
from streams.settings import Settings

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("aiokafka", "confluent")
BIG_BYTES = 64 * 1024 * 1024  # what the fuzzing producers may send (the stages accept 1 MiB)
STAGES = ("segmenter", "indexer", "encoder", "indexer-records", "query")

# what must come out of a bad message
DEAD_LETTER, ERROR_REPLY, DROPPED = "dead_letter", "error_reply", "dropped"
INDEXED, ANSWERED = "indexed", "answered"


@dataclass
class Message:
    """One message to send, and what must become of it."""

    kind: str
    topic: str
    key: bytes | None
    value: bytes | None
    expect: str  # dead_letter | error_reply | dropped | indexed | answered | good
    reason: str = ""  # the dead letter's error_type, or a word the error reply must contain
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    correlation_id: str | None = None
    namespace: str | None = None  # for `indexed`: the namespace whose turns are counted
    crafted: str | None = None  # undecodable batch: bad_header_key | bad_crc
    client: str = "aiokafka"
    codec: str = "none"
    partition: int = -1
    offset: int = -1


def _ex(ns: str, sid: str, seq: Any, text: str, turn_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "namespace": ns,
        "session_id": sid,
        "seq": seq,
        "exchange_id": f"{sid}:{turn_id}",
        "session_date": "2024-05-01T10:00:00",
        "turns": [{"role": "user", "speaker": "Avery", "content": text, "turn_id": turn_id}],
        **extra,
    }


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


def _dumps(data: Any) -> bytes:
    return orjson.dumps(data)


class Generator:
    """Bad messages of every kind, in rotation; the large ones a bounded number of times."""

    def __init__(self, run: str, partitions: int, n: int, rng: random.Random) -> None:
        self.run = run
        self.partitions = partitions
        self.rng = rng
        self.i = 0
        # 2 MB and 20 MB values and 1 MB questions are few: they cost memory, not coverage
        self.budget = {
            "big_2mb": min(10, max(1, n // 200)),
            "big_20mb": min(3, max(1, n // 1000)),
            "question_1mb": min(10, max(1, n // 200)),
        }
        self.ns_bad = f"fuzz-bad-{run}"
        self.ns_nokey = f"fuzz-nokey-{run}"
        self.ns_gap = f"fuzz-gap-{run}"
        self.ns_dup = f"fuzz-dup-{run}"
        self.expected_turns: Counter[str] = Counter()

    def kinds(self) -> list[Callable[[], list[Message]]]:
        return [
            self.not_json, self.kind_list, self.kind_object, self.json_array,
            self.schema_version, self.unknown_field, self.null_key, self.null_value,
            self.both_null, self.empty_value, self.invalid_utf8, self.lone_surrogate,
            self.big_2mb, self.big_20mb, self.deep_metadata, self.too_deep, self.negative_seq,
            self.duplicate_seq, self.gapped_seq, self.control_kind, self.name_quotes,
            self.name_10k, self.turn_wrong_dim, self.turn_unknown_field, self.segment_wrong_shape,
            self.segment_negative_index, self.records_schema_version, self.records_not_json,
            self.query_k0, self.query_k_million, self.query_partition_range,
            self.query_deadline_past, self.query_deadline_years, self.question_1mb,
            self.query_not_json, self.query_name_quotes, self.query_cid_10k, self.query_null_key,
            self.bad_header_key, self.bad_crc, self.query_bad_crc,
        ]  # fmt: skip

    def __iter__(self) -> Iterator[Message]:
        kinds = self.kinds()
        while True:
            for make in kinds:
                yield from make()

    def _key(self) -> bytes:
        self.i += 1
        return f"{self.ns_bad}/b{self.i}".encode()

    def _bad_ex(self, kind: str, reason: str, value: bytes | None, key: Any = "auto") -> Message:
        return Message(kind, t.EXCHANGES, self._key() if key == "auto" else key, value,
                       DEAD_LETTER, reason)  # fmt: skip

    def _valid(self, **extra: Any) -> dict[str, Any]:
        self.i += 1
        return _ex(self.ns_bad, f"b{self.i}", 0, "a hostile hello", f"h{self.i}", **extra)

    # -- memory.exchanges -----------------------------------------------------------------

    def not_json(self) -> list[Message]:
        return [self._bad_ex("not_json", "json", b"{this is not json")]

    def kind_list(self) -> list[Message]:
        return [self._bad_ex("kind_list", "schema", _dumps({"kind": [], "namespace": "n"}))]

    def kind_object(self) -> list[Message]:
        return [self._bad_ex("kind_object", "schema", _dumps(self._valid(kind={"a": 1})))]

    def json_array(self) -> list[Message]:
        return [self._bad_ex("json_array", "schema", b"[1, 2, 3]")]

    def schema_version(self) -> list[Message]:
        return [self._bad_ex("schema_version", "schema_version",
                             _dumps(self._valid(schema_version=99)))]  # fmt: skip

    def unknown_field(self) -> list[Message]:
        return [self._bad_ex("unknown_field", "schema", _dumps(self._valid(colour="blue")))]

    def null_key(self) -> list[Message]:
        self.i += 1
        self.expected_turns[self.ns_nokey] += 1
        value = _dumps(_ex(self.ns_nokey, f"k{self.i}", 0, "keyless but fine", f"k{self.i}"))
        return [Message("null_key", t.EXCHANGES, None, value, INDEXED, namespace=self.ns_nokey)]

    def null_value(self) -> list[Message]:
        return [self._bad_ex("null_value", "null_value", None)]

    def both_null(self) -> list[Message]:
        return [self._bad_ex("both_null", "null_value", None, key=None)]

    def empty_value(self) -> list[Message]:
        return [self._bad_ex("empty_value", "empty", b"")]

    def invalid_utf8(self) -> list[Message]:
        value = _dumps(self._valid()).replace(b"a hostile hello", b"a hostile \xff\xfe hello")
        return [self._bad_ex("invalid_utf8", "encoding", value)]

    def lone_surrogate(self) -> list[Message]:
        value = _dumps(self._valid()).replace(b"a hostile hello", b"a hostile \\ud800 hello")
        return [self._bad_ex("lone_surrogate", "encoding", value)]

    def _big(self, kind: str, size: int) -> list[Message]:
        if self.budget[kind] <= 0:
            return []
        self.budget[kind] -= 1
        value = _dumps(self._valid(metadata={"blob": "x" * size}))
        return [self._bad_ex(kind, "too_large", value)]

    def big_2mb(self) -> list[Message]:
        return self._big("big_2mb", 2_000_000)

    def big_20mb(self) -> list[Message]:
        return self._big("big_20mb", 20_000_000)

    def deep_metadata(self) -> list[Message]:
        return [self._bad_ex("deep_metadata", "schema",
                             _dumps(self._valid(metadata=_nested(200))))]  # fmt: skip

    def too_deep(self) -> list[Message]:
        value = b'{"metadata": ' + b"[" * 3000 + b"]" * 3000 + b"}"
        return [self._bad_ex("too_deep", "too_deep", value)]

    def negative_seq(self) -> list[Message]:
        data = self._valid()
        data["seq"] = -3
        return [self._bad_ex("negative_seq", "schema", _dumps(data))]

    def duplicate_seq(self) -> list[Message]:
        """The same seq twice in a session: the second is fenced, never applied."""
        self.i += 1
        sid, key = f"d{self.i}", f"{self.ns_dup}/d{self.i}".encode()
        self.expected_turns[self.ns_dup] += 1
        first = _dumps(_ex(self.ns_dup, sid, 0, "the first word", f"o{self.i}"))
        again = _dumps(_ex(self.ns_dup, sid, 0, "a replayed seq", f"x{self.i}"))
        return [
            Message("duplicate_seq.first", t.EXCHANGES, key, first, INDEXED, namespace=self.ns_dup),
            Message("duplicate_seq", t.EXCHANGES, key, again, INDEXED, namespace=self.ns_dup),
        ]

    def gapped_seq(self) -> list[Message]:
        """seq 0 then 5: a gap is allowed (strictly increasing is all the contract asks)."""
        self.i += 1
        sid, key = f"g{self.i}", f"{self.ns_gap}/g{self.i}".encode()
        self.expected_turns[self.ns_gap] += 2
        first = _dumps(_ex(self.ns_gap, sid, 0, "before the gap", f"a{self.i}"))
        later = _dumps(_ex(self.ns_gap, sid, 5, "after the gap", f"z{self.i}"))
        return [
            Message("gapped_seq.first", t.EXCHANGES, key, first, INDEXED, namespace=self.ns_gap),
            Message("gapped_seq", t.EXCHANGES, key, later, INDEXED, namespace=self.ns_gap),
        ]

    def control_kind(self) -> list[Message]:
        value = _dumps({"kind": "pause", "namespace": self.ns_bad, "session_id": "s"})
        return [self._bad_ex("unknown_control_kind", "schema", value)]

    def name_quotes(self) -> list[Message]:
        data = self._valid()
        data["namespace"] = 'it\'s "quoted"'
        return [self._bad_ex("name_quotes", "schema", _dumps(data))]

    def name_10k(self) -> list[Message]:
        data = self._valid()
        data["session_id"] = "s" * 10_000
        return [self._bad_ex("name_10k", "schema", _dumps(data))]

    # -- memory.turns, memory.segments, memory.records ------------------------------------

    def _raw_turn(self, **extra: Any) -> dict[str, Any]:
        self.i += 1
        return {
            "namespace": self.ns_bad, "session_id": f"b{self.i}", "turn_id": f"t{self.i}",
            "exchange_id": f"e{self.i}", "seq": 0, "index": 0, "role": "user",
            "text": "a hostile turn", "embedding": [0.5] * 7, "embedding_model": "nobody",
            **extra,
        }  # fmt: skip

    def turn_wrong_dim(self) -> list[Message]:
        return [Message("turn_wrong_dim", t.TURNS, self._key(), _dumps(self._raw_turn()),
                        DEAD_LETTER, "schema")]  # fmt: skip

    def turn_unknown_field(self) -> list[Message]:
        return [Message("turn_unknown_field", t.TURNS, self._key(),
                        _dumps(self._raw_turn(extra_field=1)), DEAD_LETTER, "schema")]  # fmt: skip

    def segment_wrong_shape(self) -> list[Message]:
        value = _dumps({"segment_id": [], "namespace": self.ns_bad, "exchanges": "none"})
        return [Message("segment_wrong_shape", t.SEGMENTS, self._key(), value, DEAD_LETTER,
                        "schema")]  # fmt: skip

    def segment_negative_index(self) -> list[Message]:
        value = _dumps({"segment_id": "x", "namespace": self.ns_bad, "session_id": "s",
                        "index": -1, "mode": "semantic", "reason": "session_flush",
                        "exchanges": [], "first_turn_id": "a", "last_turn_id": "b",
                        "tokens": 0})  # fmt: skip
        return [Message("segment_negative_index", t.SEGMENTS, self._key(), value, DEAD_LETTER,
                        "schema")]  # fmt: skip

    def records_schema_version(self) -> list[Message]:
        value = _dumps({"schema_version": 7, "namespace": self.ns_bad, "session_id": "s"})
        return [Message("records_schema_version", t.RECORDS, self._key(), value, DEAD_LETTER,
                        "schema_version")]  # fmt: skip

    def records_not_json(self) -> list[Message]:
        return [Message("records_not_json", t.RECORDS, self._key(), b"\x00\x01\x02", DEAD_LETTER,
                        "json")]  # fmt: skip

    # -- memory.queries -------------------------------------------------------------------

    def _query(self, kind: str, expect: str, reason: str, **over: Any) -> Message:
        cid = f"fz{self.run}{self.i}{uuid.uuid4().hex[:8]}"
        self.i += 1
        data = {
            "correlation_id": cid, "namespace": self.ns_bad, "query": "what happened?",
            "k": 5, "reply_partition": self.rng.randrange(self.partitions),
            "deadline_ms": int((time.time() + 300) * 1000), **over,
        }  # fmt: skip
        return Message(kind, t.QUERIES, self.ns_bad.encode(), _dumps(data), expect, reason,
                       correlation_id=cid)  # fmt: skip

    def query_k0(self) -> list[Message]:
        return [self._query("query_k0", ERROR_REPLY, "k", k=0)]

    def query_k_million(self) -> list[Message]:
        return [self._query("query_k_million", ERROR_REPLY, "k", k=1_000_000)]

    def query_partition_range(self) -> list[Message]:
        msg = self._query("query_reply_partition", DEAD_LETTER, "reply_partition",
                          reply_partition=self.partitions + 7)  # fmt: skip
        return [msg]

    def query_deadline_past(self) -> list[Message]:
        return [self._query("query_deadline_past", DROPPED, "", deadline_ms=1_000)]

    def query_deadline_years(self) -> list[Message]:
        years = int((time.time() + 5 * 365 * 86400) * 1000)
        return [self._query("query_deadline_years", ERROR_REPLY, "deadline_ms", deadline_ms=years)]

    def question_1mb(self) -> list[Message]:
        if self.budget["question_1mb"] <= 0:
            return []
        self.budget["question_1mb"] -= 1
        return [self._query("question_1mb", ERROR_REPLY, "query", query="why? " * 200_000)]

    def query_null_key(self) -> list[Message]:
        msg = self._query("query_null_key", ANSWERED, "")
        msg.key = None
        return [msg]

    def query_not_json(self) -> list[Message]:
        return [Message("query_not_json", t.QUERIES, None, b"SELECT * FROM memory", DEAD_LETTER,
                        "json")]  # fmt: skip

    def query_name_quotes(self) -> list[Message]:
        return [self._query("query_name_quotes", ERROR_REPLY, "namespace", namespace="a'b\"c")]

    def query_cid_10k(self) -> list[Message]:
        msg = self._query("query_cid_10k", DEAD_LETTER, "schema")
        msg.value = (msg.value or b"").replace((msg.correlation_id or "").encode(), b"c" * 10_000)
        msg.correlation_id = None  # no reply can be addressed: a dead letter instead
        return [msg]

    # -- record batches no client can decode (crafted, below the agent) ------------------

    def bad_header_key(self) -> list[Message]:
        return [Message("bad_header_key", t.EXCHANGES, self._key(), b'{"x": 1}', DEAD_LETTER,
                        "undecodable", crafted="bad_header_key")]  # fmt: skip

    def bad_crc(self) -> list[Message]:
        return [Message("bad_crc", t.EXCHANGES, self._key(), b'{"x": 2}', DEAD_LETTER,
                        "undecodable", crafted="bad_crc")]  # fmt: skip

    def query_bad_crc(self) -> list[Message]:
        return [Message("query_bad_crc", t.QUERIES, b"q", b'{"x": 3}', DEAD_LETTER,
                        "undecodable", crafted="bad_crc")]  # fmt: skip


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
            self.ck[codec] = Producer({
                "bootstrap.servers": self.bootstrap, "compression.type": codec,
                "message.max.bytes": BIG_BYTES, "linger.ms": 5,
                "log.connection.close": False,  # the broker closes idle connections: not news
            })  # fmt: skip

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
    return _dumps(_ex(ns, f"s{session}", seq, text, f"g{session}-{seq}"))


def _good_query(ns: str, partitions: int, rng: random.Random) -> tuple[str, bytes]:
    cid = uuid.uuid4().hex
    data = {
        "correlation_id": cid, "namespace": ns, "query": "what about the garden?", "k": 3,
        "reply_partition": rng.randrange(partitions),
        "deadline_ms": int((time.time() + 300) * 1000),
    }  # fmt: skip
    return cid, _dumps(data)


async def fuzz(
    settings: Settings, n: int, alive: Callable[[], dict[str, bool]], seed: int = 11,
    drain_timeout_s: float = 900.0,
) -> FuzzReport:  # fmt: skip
    """Send `n` bad messages (and as many good exchanges, plus good queries) and account
    for every one of them. `alive` reports which stage processes are running."""
    started = time.perf_counter()
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:6]
    producers = Producers(settings.kafka_bootstrap)
    await producers.start()
    try:
        parts = len(await producers.aio["none"].partitions_for(t.REPLIES))
        gen = Generator(run, parts, n, rng)
        sent, good_queries, good_count, ns_good = await _send_all(
            producers, gen, n, parts, rng, run
        )
    finally:
        await producers.close()
    async with LagReader(settings.kafka_bootstrap) as lag:
        await lag.wait_drained(STAGES, timeout_s=drain_timeout_s)
    report = await _account(settings, sent, gen, good_queries, good_count, ns_good)
    report.stages_alive = ", ".join(f"{k}={'yes' if v else 'NO'}" for k, v in alive().items())
    report.seconds = time.perf_counter() - started
    return report


async def _send_all(producers: Producers, gen: Generator, n: int, parts: int,
                    rng: random.Random, run: str) -> tuple[list[Message], dict[str, str], int, str]:  # fmt: skip
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
        good = Message("good", t.EXCHANGES, f"{ns_good}/s{s}".encode(),
                       _good_exchange(ns_good, s, seqs[s], rng), "good",
                       headers=[("trace", b"\x00\xff")] if i % 3 == 0 else [],
                       client=CLIENTS[s % 2], codec=CODECS[s % len(CODECS)])  # fmt: skip
        seqs[s] += 1
        good_count += 1
        round_.append(good)
        if i % 20 == 0:
            cid, value = _good_query(ns_good, parts, rng)
            good_queries[cid] = ns_good
            round_.append(Message("good_query", t.QUERIES, ns_good.encode(), value, "answered",
                                  client=CLIENTS[(i // 20) % 2],
                                  codec=CODECS[(i // 40) % len(CODECS)]))  # fmt: skip
        if len(round_) >= 100 or i == n - 1:
            await producers.send(round_)
            round_ = []
    # close every good session so the last segments reach the encoder and indexer
    closing = [
        Message("good_end", t.EXCHANGES, f"{ns_good}/s{s}".encode(),
                _dumps({"kind": "end_session", "namespace": ns_good, "session_id": f"s{s}",
                        "after_seq": seqs[s] - 1}), "good",
                client=CLIENTS[s % 2], codec=CODECS[s % len(CODECS)])
        for s in range(sessions) if seqs[s]
    ]  # fmt: skip
    await producers.send(closing)
    return sent, good_queries, good_count, ns_good


def _take_one(it: Iterator[Message]) -> list[Message]:
    """The next bad message, with the message it pairs with (duplicate and gapped seq)."""
    first = next(it)
    if first.kind.endswith(".first"):
        return [first, next(it)]
    return [first]


async def _account(settings: Settings, sent: list[Message], gen: Generator,
                   good_queries: dict[str, str], good_count: int, ns_good: str) -> FuzzReport:  # fmt: skip
    from streams.factories import open_store

    report = FuzzReport(good_exchanges=good_count, good_queries=len(good_queries))
    dead: dict[tuple[str, int, int], dict[str, bytes]] = {}
    sources = {m.topic for m in sent}
    for topic in sources:
        for _, _, headers in await read_topic(settings.kafka_bootstrap, t.dlq(topic)):
            src = headers.get("source_topic", b"").decode(errors="replace")
            try:
                where = (src, int(headers["source_partition"]), int(headers["source_offset"]))
            except (KeyError, ValueError):
                continue
            dead[where] = headers
    replies: dict[str, dict[str, Any]] = {}
    for key, value, _ in await read_topic(settings.kafka_bootstrap, t.REPLIES):
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
        + ", ".join(f"{k}={v}" for k, v in sorted(r.by_client.items())) + ")",
        f"dead-lettered:         {r.dead_lettered} (without a reason header: {r.dead_without_reason})",
    ]  # fmt: skip
    lines += [f"  {code:<20} {count}" for code, count in r.dead_by_reason.most_common()]
    lines += [
        f"error replies:         {r.error_replies} (each naming the field)",
        f"dropped (deadline past, logged): {r.dropped}",
        f"accepted/fenced as expected (null key, seq gap, replayed seq): {r.accepted_indexed} turns",
        f"good exchanges indexed: {r.good_indexed}/{r.good_exchanges}",
        f"good queries answered:  {r.good_answered}/{r.good_queries}",
        f"lost:                  {r.lost}",
        f"unexpected outcomes:   {len(r.mismatched)}",
        f"stages alive:          {r.stages_alive}",
        f"time:                  {r.seconds:.1f}s",
    ]  # fmt: skip
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
