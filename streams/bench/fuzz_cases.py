"""The messages of `lychee bench fuzz`: hostile input of every kind, each with the outcome
it must have (a dead letter naming the problem, an error reply, a drop, acceptance)."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas import topics as t
from schemas.base import MAX_SEQ

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
    burst: bool = False  # the next message goes with this one, right after it


def exchange(ns: str, sid: str, seq: Any, text: str, turn_id: str, **extra: Any) -> dict[str, Any]:
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


def dumps(data: Any) -> bytes:
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
        self.ns_burst = f"fuzz-burst-{run}"
        self.ns_max = f"fuzz-max-{run}"
        self.expected_turns: Counter[str] = Counter()

    def kinds(self) -> list[Callable[[], list[Message]]]:
        return [
            self.not_json,
            self.kind_list,
            self.kind_object,
            self.json_array,
            self.schema_version,
            self.unknown_field,
            self.null_key,
            self.null_value,
            self.both_null,
            self.empty_value,
            self.invalid_utf8,
            self.lone_surrogate,
            self.big_2mb,
            self.big_20mb,
            self.deep_metadata,
            self.too_deep,
            self.tenant_burst,
            self.huge_seq,
            self.max_seq,
            self.negative_seq,
            self.duplicate_seq,
            self.gapped_seq,
            self.control_kind,
            self.name_quotes,
            self.name_10k,
            self.turn_wrong_dim,
            self.turn_unknown_field,
            self.segment_wrong_shape,
            self.segment_negative_index,
            self.records_schema_version,
            self.records_not_json,
            self.query_k0,
            self.query_k_million,
            self.query_partition_range,
            self.query_deadline_past,
            self.query_deadline_years,
            self.question_1mb,
            self.query_not_json,
            self.query_name_quotes,
            self.query_cid_10k,
            self.query_null_key,
            self.bad_header_key,
            self.bad_crc,
            self.query_bad_crc,
        ]

    def __iter__(self) -> Iterator[Message]:
        kinds = self.kinds()
        while True:
            for make in kinds:
                yield from make()

    def _key(self) -> bytes:
        self.i += 1
        return f"{self.ns_bad}/b{self.i}".encode()

    def _bad_ex(self, kind: str, reason: str, value: bytes | None, key: Any = "auto") -> Message:
        return Message(
            kind, t.EXCHANGES, self._key() if key == "auto" else key, value, DEAD_LETTER, reason
        )

    def _valid(self, **extra: Any) -> dict[str, Any]:
        self.i += 1
        return exchange(self.ns_bad, f"b{self.i}", 0, "a hostile hello", f"h{self.i}", **extra)

    # -- memory.exchanges -----------------------------------------------------------------

    def not_json(self) -> list[Message]:
        return [self._bad_ex("not_json", "json", b"{this is not json")]

    def kind_list(self) -> list[Message]:
        return [self._bad_ex("kind_list", "schema", dumps({"kind": [], "namespace": "n"}))]

    def kind_object(self) -> list[Message]:
        return [self._bad_ex("kind_object", "schema", dumps(self._valid(kind={"a": 1})))]

    def json_array(self) -> list[Message]:
        return [self._bad_ex("json_array", "schema", b"[1, 2, 3]")]

    def schema_version(self) -> list[Message]:
        return [
            self._bad_ex("schema_version", "schema_version", dumps(self._valid(schema_version=99)))
        ]

    def unknown_field(self) -> list[Message]:
        return [self._bad_ex("unknown_field", "schema", dumps(self._valid(colour="blue")))]

    def null_key(self) -> list[Message]:
        self.i += 1
        self.expected_turns[self.ns_nokey] += 1
        value = dumps(exchange(self.ns_nokey, f"k{self.i}", 0, "keyless but fine", f"k{self.i}"))
        return [Message("null_key", t.EXCHANGES, None, value, INDEXED, namespace=self.ns_nokey)]

    def null_value(self) -> list[Message]:
        return [self._bad_ex("null_value", "null_value", None)]

    def both_null(self) -> list[Message]:
        return [self._bad_ex("both_null", "null_value", None, key=None)]

    def empty_value(self) -> list[Message]:
        return [self._bad_ex("empty_value", "empty", b"")]

    def invalid_utf8(self) -> list[Message]:
        value = dumps(self._valid()).replace(b"a hostile hello", b"a hostile \xff\xfe hello")
        return [self._bad_ex("invalid_utf8", "encoding", value)]

    def lone_surrogate(self) -> list[Message]:
        value = dumps(self._valid()).replace(b"a hostile hello", b"a hostile \\ud800 hello")
        return [self._bad_ex("lone_surrogate", "encoding", value)]

    def _big(self, kind: str, size: int) -> list[Message]:
        if self.budget[kind] <= 0:
            return []
        self.budget[kind] -= 1
        value = dumps(self._valid(metadata={"blob": "x" * size}))
        return [self._bad_ex(kind, "too_large", value)]

    def big_2mb(self) -> list[Message]:
        return self._big("big_2mb", 2_000_000)

    def big_20mb(self) -> list[Message]:
        return self._big("big_20mb", 20_000_000)

    def deep_metadata(self) -> list[Message]:
        return [self._bad_ex("deep_metadata", "schema", dumps(self._valid(metadata=_nested(200))))]

    def too_deep(self) -> list[Message]:
        value = b'{"metadata": ' + b"[" * 3000 + b"]" * 3000 + b"}"
        return [self._bad_ex("too_deep", "too_deep", value)]

    def tenant_burst(self) -> list[Message]:
        """Identical hostile exchanges of one namespace, in a row on one partition: each is
        dead-lettered, and the other namespaces' traffic keeps flowing (one tenant cannot
        pause a stage for all)."""
        self.i += 1
        key = f"{self.ns_burst}/b{self.i}".encode()
        data = exchange(self.ns_burst, f"b{self.i}", 0, "again", f"u{self.i}")
        value = dumps({**data, "metadata": _nested(17)})  # one level over the contract's
        burst = [
            Message("tenant_burst", t.EXCHANGES, key, value, DEAD_LETTER, "schema")
            for _ in range(6)
        ]
        for m in burst[:-1]:
            m.burst = True
        return burst

    def huge_seq(self) -> list[Message]:
        data = self._valid()
        data["seq"] = MAX_SEQ + 1  # one past what every store of a seq reads back exactly
        return [self._bad_ex("huge_seq", "schema", dumps(data))]

    def max_seq(self) -> list[Message]:
        """The largest seq (`schemas.base.MAX_SEQ`): accepted and indexed."""
        self.i += 1
        sid, key = f"m{self.i}", f"{self.ns_max}/m{self.i}".encode()
        self.expected_turns[self.ns_max] += 1
        value = dumps(exchange(self.ns_max, sid, MAX_SEQ, "the very last word", f"m{self.i}"))
        return [Message("max_seq", t.EXCHANGES, key, value, INDEXED, namespace=self.ns_max)]

    def negative_seq(self) -> list[Message]:
        data = self._valid()
        data["seq"] = -3
        return [self._bad_ex("negative_seq", "schema", dumps(data))]

    def duplicate_seq(self) -> list[Message]:
        """The same seq twice in a session, the second another exchange: it is fenced, never
        applied, and dead-lettered by name (the session never had its turns), not dropped."""
        self.i += 1
        sid, key = f"d{self.i}", f"{self.ns_dup}/d{self.i}".encode()
        self.expected_turns[self.ns_dup] += 1
        first = dumps(exchange(self.ns_dup, sid, 0, "the first word", f"o{self.i}"))
        again = dumps(exchange(self.ns_dup, sid, 0, "a replayed seq", f"x{self.i}"))
        return [
            Message("duplicate_seq.first", t.EXCHANGES, key, first, INDEXED, namespace=self.ns_dup),
            Message("duplicate_seq", t.EXCHANGES, key, again, DEAD_LETTER, "unprocessable"),
        ]

    def gapped_seq(self) -> list[Message]:
        """seq 0 then 5: a gap is allowed (strictly increasing is all the contract asks)."""
        self.i += 1
        sid, key = f"g{self.i}", f"{self.ns_gap}/g{self.i}".encode()
        self.expected_turns[self.ns_gap] += 2
        first = dumps(exchange(self.ns_gap, sid, 0, "before the gap", f"a{self.i}"))
        later = dumps(exchange(self.ns_gap, sid, 5, "after the gap", f"z{self.i}"))
        return [
            Message("gapped_seq.first", t.EXCHANGES, key, first, INDEXED, namespace=self.ns_gap),
            Message("gapped_seq", t.EXCHANGES, key, later, INDEXED, namespace=self.ns_gap),
        ]

    def control_kind(self) -> list[Message]:
        value = dumps({"kind": "pause", "namespace": self.ns_bad, "session_id": "s"})
        return [self._bad_ex("unknown_control_kind", "schema", value)]

    def name_quotes(self) -> list[Message]:
        data = self._valid()
        data["namespace"] = 'it\'s "quoted"'
        return [self._bad_ex("name_quotes", "schema", dumps(data))]

    def name_10k(self) -> list[Message]:
        data = self._valid()
        data["session_id"] = "s" * 10_000
        return [self._bad_ex("name_10k", "schema", dumps(data))]

    # -- memory.turns, memory.segments, memory.records ------------------------------------

    def _raw_turn(self, **extra: Any) -> dict[str, Any]:
        self.i += 1
        return {
            "namespace": self.ns_bad,
            "session_id": f"b{self.i}",
            "turn_id": f"t{self.i}",
            "exchange_id": f"e{self.i}",
            "seq": 0,
            "index": 0,
            "role": "user",
            "text": "a hostile turn",
            "embedding": [0.5] * 7,
            "embedding_model": "nobody",
            **extra,
        }

    def turn_wrong_dim(self) -> list[Message]:
        return [
            Message(
                "turn_wrong_dim",
                t.TURNS,
                self._key(),
                dumps(self._raw_turn()),
                DEAD_LETTER,
                "schema",
            )
        ]

    def turn_unknown_field(self) -> list[Message]:
        return [
            Message(
                "turn_unknown_field",
                t.TURNS,
                self._key(),
                dumps(self._raw_turn(extra_field=1)),
                DEAD_LETTER,
                "schema",
            )
        ]

    def segment_wrong_shape(self) -> list[Message]:
        value = dumps({"segment_id": [], "namespace": self.ns_bad, "exchanges": "none"})
        return [
            Message("segment_wrong_shape", t.SEGMENTS, self._key(), value, DEAD_LETTER, "schema")
        ]

    def segment_negative_index(self) -> list[Message]:
        value = dumps(
            {
                "segment_id": "x",
                "namespace": self.ns_bad,
                "session_id": "s",
                "index": -1,
                "mode": "semantic",
                "reason": "session_flush",
                "exchanges": [],
                "first_turn_id": "a",
                "last_turn_id": "b",
                "tokens": 0,
            }
        )
        return [
            Message("segment_negative_index", t.SEGMENTS, self._key(), value, DEAD_LETTER, "schema")
        ]

    def records_schema_version(self) -> list[Message]:
        value = dumps({"schema_version": 7, "namespace": self.ns_bad, "session_id": "s"})
        return [
            Message(
                "records_schema_version",
                t.RECORDS,
                self._key(),
                value,
                DEAD_LETTER,
                "schema_version",
            )
        ]

    def records_not_json(self) -> list[Message]:
        return [
            Message(
                "records_not_json", t.RECORDS, self._key(), b"\x00\x01\x02", DEAD_LETTER, "json"
            )
        ]

    # -- memory.queries -------------------------------------------------------------------

    def _query(self, kind: str, expect: str, reason: str, **over: Any) -> Message:
        cid = f"fz{self.run}{self.i}{uuid.uuid4().hex[:8]}"
        self.i += 1
        data = {
            "correlation_id": cid,
            "namespace": self.ns_bad,
            "query": "what happened?",
            "k": 5,
            "reply_partition": self.rng.randrange(self.partitions),
            "deadline_ms": int((time.time() + 300) * 1000),
            **over,
        }
        return Message(
            kind, t.QUERIES, self.ns_bad.encode(), dumps(data), expect, reason, correlation_id=cid
        )

    def query_k0(self) -> list[Message]:
        return [self._query("query_k0", ERROR_REPLY, "k", k=0)]

    def query_k_million(self) -> list[Message]:
        return [self._query("query_k_million", ERROR_REPLY, "k", k=1_000_000)]

    def query_partition_range(self) -> list[Message]:
        msg = self._query(
            "query_reply_partition",
            DEAD_LETTER,
            "reply_partition",
            reply_partition=self.partitions + 7,
        )
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
        return [
            Message("query_not_json", t.QUERIES, None, b"SELECT * FROM memory", DEAD_LETTER, "json")
        ]

    def query_name_quotes(self) -> list[Message]:
        return [self._query("query_name_quotes", ERROR_REPLY, "namespace", namespace="a'b\"c")]

    def query_cid_10k(self) -> list[Message]:
        msg = self._query("query_cid_10k", DEAD_LETTER, "schema")
        msg.value = (msg.value or b"").replace((msg.correlation_id or "").encode(), b"c" * 10_000)
        msg.correlation_id = None  # no reply can be addressed: a dead letter instead
        return [msg]

    # -- record batches no client can decode (crafted, below the agent) ------------------

    def bad_header_key(self) -> list[Message]:
        return [
            Message(
                "bad_header_key",
                t.EXCHANGES,
                self._key(),
                b'{"x": 1}',
                DEAD_LETTER,
                "undecodable",
                crafted="bad_header_key",
            )
        ]

    def bad_crc(self) -> list[Message]:
        return [
            Message(
                "bad_crc",
                t.EXCHANGES,
                self._key(),
                b'{"x": 2}',
                DEAD_LETTER,
                "undecodable",
                crafted="bad_crc",
            )
        ]

    def query_bad_crc(self) -> list[Message]:
        return [
            Message(
                "query_bad_crc",
                t.QUERIES,
                b"q",
                b'{"x": 3}',
                DEAD_LETTER,
                "undecodable",
                crafted="bad_crc",
            )
        ]
