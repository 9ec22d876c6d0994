"""The encoder and record indexing in the running pipeline."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from schemas import topics as t
from streams.kafka.guard import DeadLetters, Incoming, run_guarded
from streams.kafka.lag import LagReader
from streams.kafka.producer import KafkaPublisher
from streams.kafka.reader import read_topic
from streams.kafka.serde import decode
from streams.stack.embedded import Stack
from tests.fakes.openai_server import FakeOpenAI, text
from tests.streams.test_pipeline import conversation, ingest, store
from tests.workers.encoder.test_llm_encoder import make_segment
from workers.encoder.encoders import GuardedLLMEncoder
from workers.encoder.llm_encoder import LLMEncoder
from workers.encoder.service import EncoderService
from workers.llm.calls import make_client
from workers.ports import ListPublisher

pytestmark = pytest.mark.integration


def snapshot(stack: Stack, ns: str) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    rs = store(stack)
    out = []
    for name in ("records", "nodes"):
        tbl = rs.table(name)
        assert tbl is not None
        rows = tbl.search().where(f"namespace = '{ns}'").limit(None).to_list()
        out.append(
            sorted(
                ({k: v for k, v in r.items() if k != "vector"} for r in rows), key=lambda r: r["id"]
            )
        )
    return out[0], out[1]


async def test_encoder_stage_records_and_nodes_indexed_and_redelivery_changes_nothing(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    ns = f"enc-{uuid.uuid4().hex[:6]}"
    await ingest(settings, conversation(ns))
    records, nodes = snapshot(stack, ns)
    assert records and nodes
    assert {n["node_type"] for n in nodes} >= {"entity", "topic", "event_frame"}
    assert all(set(r["evidence"]) <= {f"D0:{i}" for i in range(8)} for r in records)
    counts = store(stack).count_by_type(ns)
    assert sum(counts["records"].values()) == len(records)
    # redeliver every segment of the namespace: the encoder's cache gives the same batches
    segments = await read_topic(stack.bootstrap, t.SEGMENTS, f"{ns}/")
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        for key, value, _ in segments:
            await producer.send_and_wait(t.SEGMENTS, value, key=key)
    finally:
        await producer.stop()
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=120)
    assert snapshot(stack, ns) == (records, nodes)
    from streams.status import construction_usage

    usage = (await construction_usage(settings, ns))[ns]
    assert usage["segments"] == len(segments) and usage["prompt_tokens"] > 0


async def test_encoder_invalid_llm_output_dead_letters_the_segment_intact(
    stack: Stack, settings, redis_url
) -> None:  # type: ignore[no-untyped-def]
    from redis.asyncio import Redis

    ns = f"dlq-{uuid.uuid4().hex[:6]}"  # its own segment id: no other test's cached batch
    seg = make_segment(1).model_copy(update={"namespace": ns, "segment_id": f"{ns}/s1/0"})
    raw = seg.model_dump_json().encode()
    publisher = KafkaPublisher.from_settings(settings)
    await publisher.start()
    redis = Redis.from_url(redis_url)
    try:
        with FakeOpenAI() as server:
            server.script(text("nope"), text("still nope"))
            client = make_client(server.url, None, timeout_s=5.0)
            svc = EncoderService(redis, GuardedLLMEncoder(LLMEncoder(client, "m")), ListPublisher())
            # an offset no message of this shared stack holds: a letter naming a real one
            # reads as that message's outcome (the fuzz test's segment at 0@42 once did)
            rec = Incoming(t.SEGMENTS, 0, 1 << 60, f"{seg.namespace}/s1".encode(), raw)
            await run_guarded(
                "encoder",
                [rec],
                lambda r: decode(r.value, type(seg)),
                svc.handle,
                DeadLetters(publisher, "encoder"),
            )
            await client.close()
            assert len(server.requests) == 2  # the call and its one repair, no more
    finally:
        await publisher.stop()
        await redis.aclose()
    dead = await read_topic(stack.bootstrap, t.dlq(t.SEGMENTS), f"{seg.namespace}/")
    assert [v for _, v, _ in dead] == [raw]
    assert dead[0][2]["error_type"] == b"unprocessable"
