"""Messages from the standard clients reach every stage: librdkafka (confluent-kafka) and
aiokafka, uncompressed and with each of gzip, snappy, lz4 and zstd, with and without headers,
with null keys (DESIGN §9: "messages from any standard client are accepted")."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

import pytest

from schemas import FinalizeReason, RawTurn, Role, Segment, SegmentExchange, SegmentMode, Turn
from schemas import topics as t
from schemas.records import MemoryRecord, MemoryType, RecordBatch, normalize_text, record_id
from streams.bench.fuzz import CLIENTS, CODECS, Message, Producers
from streams.factories import embedding_info
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.settings import Settings
from streams.stack.embedded import Stack
from tests.streams.test_pipeline import store

pytestmark = pytest.mark.integration

COMBOS = [(client, codec) for client in CLIENTS for codec in CODECS]


def exchange(ns: str, sid: str, seq: int, text: str) -> bytes:
    turn = Turn(role=Role.user, speaker="Robin", content=text, turn_id=f"{sid}-{seq}")
    from schemas import Exchange

    ex = Exchange(
        namespace=ns,
        session_id=sid,
        seq=seq,
        exchange_id=f"{sid}:{seq}",
        session_date=datetime(2024, 6, 1, 9, 0),
        turns=[turn],
    )
    return ex.model_dump_json().encode()


def end_session(ns: str, sid: str, after_seq: int) -> bytes:
    from schemas import ControlKind, SessionControl

    ctl = SessionControl(
        kind=ControlKind.end_session, namespace=ns, session_id=sid, after_seq=after_seq
    )
    return ctl.model_dump_json().encode()


def raw_turn(ns: str) -> bytes:
    model, dim = embedding_info(Settings())
    return (
        RawTurn(
            namespace=ns,
            session_id="t",
            turn_id="t-0",
            exchange_id="t:0",
            seq=0,
            index=0,
            role=Role.user,
            speaker="Robin",
            text="The ferry leaves at noon.",
            embedding=[1.0] + [0.0] * (dim - 1),
            embedding_model=model,
        )
        .model_dump_json()
        .encode()
    )


def segment(ns: str) -> bytes:
    turns = [Turn(role=Role.user, speaker="Robin", content="I moved to Porto in March 2023.")]
    ex = SegmentExchange(exchange_id="x:0", seq=0, turn_ids=["x-0"], turns=turns, tokens=12)
    return (
        Segment(
            segment_id=f"{ns}/x/0",
            namespace=ns,
            session_id="x",
            index=0,
            mode=SegmentMode.semantic,
            reason=FinalizeReason.session_flush,
            exchanges=[ex],
            first_turn_id="x-0",
            last_turn_id="x-0",
            tokens=12,
            session_date=datetime(2024, 6, 1),
        )
        .model_dump_json()
        .encode()
    )


def record_batch(ns: str) -> bytes:
    text = "Robin keeps a rowing boat at the marina."
    norm = normalize_text(MemoryType.fact, text)
    rec = MemoryRecord(
        record_id=record_id(ns, norm),
        namespace=ns,
        memory_type=MemoryType.fact,
        semantic_text=text,
        normalized_text=norm,
        entities=["Robin"],
        tags=["boat"],
        evidence=["r-0"],
        source_session="r",
        segment_id=f"{ns}/r/0",
    )
    return (
        RecordBatch(
            namespace=ns,
            session_id="r",
            segment_id=f"{ns}/r/0",
            segment_index=0,
            first_turn_id="r-0",
            last_turn_id="r-0",
            encoder="extractive",
            records=[rec],
        )
        .model_dump_json()
        .encode()
    )


def query(cid: str, ns: str, partition: int) -> bytes:
    from schemas import QueryRequest

    return (
        QueryRequest(
            correlation_id=cid,
            namespace=ns,
            query="where is the boat?",
            k=3,
            reply_partition=partition,
            deadline_ms=int((time.time() + 300) * 1000),
        )
        .model_dump_json()
        .encode()
    )


async def test_standard_clients_every_codec_headers_and_null_keys_reach_every_stage(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    run = uuid.uuid4().hex[:6]
    hdr = [("trace-id", b"abc"), ("bin", b"\x00\xff")]
    msgs: list[Message] = []
    cids: dict[str, tuple[str, str]] = {}
    for i, (client, codec) in enumerate(COMBOS):
        ns = f"std-{client[:2]}-{codec}-{run}"

        def m(
            topic: str,
            key: bytes | None,
            value: bytes,
            headers: list | None = None,  # type: ignore[type-arg]
            c: str = client,
            k: str = codec,
        ) -> Message:
            return Message(
                "std",
                topic,
                key,
                value,
                "good",
                headers=hdr if headers is None else headers,
                client=c,
                codec=k,
            )

        # keyed session with and without headers; a keyless one-exchange session
        msgs += [
            m(t.EXCHANGES, f"{ns}/a".encode(), exchange(ns, "a", 0, "I bought a red kayak.")),
            m(
                t.EXCHANGES,
                f"{ns}/a".encode(),
                exchange(ns, "a", 1, "It is moored at the lake."),
                [],
            ),
            m(t.EXCHANGES, f"{ns}/a".encode(), end_session(ns, "a", 1), []),
            m(t.EXCHANGES, None, exchange(ns, "b", 0, "My sister lives in Oslo.")),
            m(t.TURNS, None if i % 2 else f"{ns}/t".encode(), raw_turn(ns), hdr if i % 2 else []),
            m(t.SEGMENTS, f"{ns}/x".encode(), segment(ns), [] if i % 2 else hdr),
            m(t.RECORDS, None if i % 3 else f"{ns}/r".encode(), record_batch(ns)),
        ]
        cid = f"std-{run}-{i}"
        cids[cid] = (client, codec)
        msgs.append(m(t.QUERIES, None if i % 2 else ns.encode(), query(cid, ns, i % 4)))
    producers = Producers(stack.bootstrap)
    await producers.start()
    try:
        await producers.send(msgs)
    finally:
        await producers.close()
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(
            ("segmenter", "indexer", "encoder", "indexer-records", "query"), timeout_s=240
        )
    rs = store(stack)
    missing = []
    for client, codec in COMBOS:
        ns = f"std-{client[:2]}-{codec}-{run}"
        turns = rs.count("turns", ns)  # 3 exchanges + 1 raw turn
        records = sum(rs.count_by_type(ns)["records"].values())  # session a, segment x, batch r
        if turns != 4 or records < 3:
            missing.append(f"{client}/{codec}: {turns} turns, {records} records")
    replies = {k.decode(): v for k, v, _ in await read_topic(stack.bootstrap, t.REPLIES) if k and v}
    unanswered = [cids[c] for c in cids if b'"status":"ok"' not in replies.get(c, b"")]
    assert missing == [] and unanswered == []
    dead = [
        d
        for topic in (t.EXCHANGES, t.TURNS, t.SEGMENTS, t.RECORDS, t.QUERIES)
        for d in await read_topic(stack.bootstrap, t.dlq(topic), None)
        if run in (d[0] or b"").decode(errors="replace")
    ]
    assert dead == []
