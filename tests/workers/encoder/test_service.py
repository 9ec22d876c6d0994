"""The encoder stage against real Redis: cache, reference context, token counters."""

from __future__ import annotations

import asyncio

import pytest

from schemas import BoundarySignals, FinalizeReason
from schemas import topics as t
from schemas.records import RecordBatch
from tests.fakes.openai_server import FakeOpenAI, slow, text, valid
from tests.waiting import eventually
from tests.workers.encoder.test_llm_encoder import make_segment, record, reply
from workers.encoder.encoders import ExtractiveEncoder, GuardedLLMEncoder
from workers.encoder.llm_encoder import LLMEncoder
from workers.encoder.service import EncoderService, read_usage
from workers.errors import Unprocessable
from workers.llm.calls import make_client
from workers.ports import ListPublisher


def batches(pub: ListPublisher) -> list[RecordBatch]:
    return [RecordBatch.model_validate_json(m.value) for m in pub.messages if m.topic == t.RECORDS]


def second_segment():  # type: ignore[no-untyped-def]
    seg = make_segment(1)
    return seg.model_copy(update={"segment_id": "ns/s1/1", "index": 1})


async def test_encoder_service_redelivered_segment_yields_the_same_batch_counted_once(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    pub = ListPublisher()
    svc = EncoderService(redis, ExtractiveEncoder(), pub)
    seg = make_segment(2)
    await svc.handle([seg])
    usage = (await read_usage(redis, "ns"))["ns"]
    await svc.handle([seg])  # redelivered
    first, again = batches(pub)
    assert first == again and first.records
    assert first.usage.estimated and first.usage.prompt_tokens > 0 and first.encoder == "extractive"
    assert (await read_usage(redis, "ns"))["ns"] == usage  # not counted twice
    assert usage["segments"] == 1 and usage["prompt_tokens"] == first.usage.prompt_tokens


async def test_encoder_service_batch_carries_where_and_why_the_segment_closed(redis) -> None:  # type: ignore[no-untyped-def]
    signals = BoundarySignals(
        surprise=0.4,
        robust_surprise=1.2,
        absolute_surprise=1.4,
        cohesion_drop=0.03,
        cohesion_term=0.5,
        length_pressure=0.9,
        turn_pressure=0.45,
        score=2.1,
        p_cut=0.73,
    )
    seg = make_segment(3).model_copy(
        update={"reason": FinalizeReason.semantic_boundary, "signals": signals}
    )
    pub = ListPublisher()
    await EncoderService(redis, ExtractiveEncoder(), pub).handle([seg])
    (out,) = batches(pub)
    assert out.reason is FinalizeReason.semantic_boundary and out.signals == signals
    assert (out.first_seq, out.last_seq, out.exchanges, out.tokens) == (0, 2, 3, 60)


async def test_encoder_service_carries_reference_context_in_segment_order(redis) -> None:  # type: ignore[no-untyped-def]
    with FakeOpenAI() as server:
        server.script(valid(reply(record(), note="Ines owns Rex, a dog.")), valid(reply()))
        client = make_client(server.url, None, timeout_s=5.0)
        svc = EncoderService(redis, GuardedLLMEncoder(LLMEncoder(client, "m")), ListPublisher())
        await svc.handle([make_segment(2), second_segment()])
        await client.close()
        first, second = (r["messages"][-1]["content"] for r in server.requests)
    assert "Ines owns Rex" not in first  # nothing before the first segment
    assert "Ines owns Rex, a dog." in second  # the note of segment 0...
    assert "event: Ines adopted a dog named Rex" in second  # ...and its record summary
    assert (await read_usage(redis, "ns"))["ns"]["calls"] == 2


async def test_encoder_service_invalid_output_twice_is_unprocessable(redis) -> None:  # type: ignore[no-untyped-def]
    with FakeOpenAI() as server:
        server.script(text("not json"), text("{still not json"))
        client = make_client(server.url, None, timeout_s=5.0)
        svc = EncoderService(redis, GuardedLLMEncoder(LLMEncoder(client, "m")), ListPublisher())
        with pytest.raises(Unprocessable, match="after one repair"):
            await svc.handle([make_segment(1)])
        await client.close()
    assert await redis.get("lychee:enc:cache:ns/s1/0") is None  # nothing cached, nothing counted
    assert await read_usage(redis, "ns") == {}


async def test_encoder_service_records_of_two_sessions_share_the_namespace_key(redis) -> None:  # type: ignore[no-untyped-def]
    # Records and nodes are merged by read-modify-write: one key per namespace puts all of a
    # namespace's batches on one partition, so one indexer at a time owns its rows.
    pub = ListPublisher()
    svc = EncoderService(redis, ExtractiveEncoder(), pub)
    other = make_segment(2).model_copy(update={"session_id": "s2", "segment_id": "ns/s2/0"})
    await svc.handle([make_segment(2), other])
    keys = [m.key for m in pub.messages if m.topic == t.RECORDS]
    assert keys == ["ns", "ns"]


async def test_encoder_service_two_concurrent_encodes_of_one_segment_call_the_llm_once(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    # A rebalance while the former owner is still inside its LLM call: the new owner gets the
    # same segment. One LLM call, one count, and both publish the very same batch.
    with FakeOpenAI() as server:
        server.script(
            slow(1.5, valid(reply(record()))),
            valid(reply(record(semantic_text="Ines adopted a cat named Tom."))),
        )
        client = make_client(server.url, None, timeout_s=10.0)
        pubs = [ListPublisher(), ListPublisher()]
        workers = [
            EncoderService(
                redis, GuardedLLMEncoder(LLMEncoder(client, "m")), pub, lease_poll_s=0.05
            )
            for pub in pubs
        ]
        seg = make_segment(2)
        first = asyncio.create_task(workers[0].handle([seg]))
        await eventually(lambda: server.requests, what="the first encode inside its LLM call")
        await workers[1].handle([seg])
        await first
        await client.close()
        calls = len(server.requests)
    (one,), (two,) = batches(pubs[0]), batches(pubs[1])
    assert calls == 1
    assert one == two and [r.semantic_text for r in one.records] == [
        "Ines adopted a dog named Rex on 2023-05-07."
    ]
    usage = (await read_usage(redis, "ns"))["ns"]
    assert usage["calls"] == 1 and usage["segments"] == 1
    assert usage["input_tokens"] == one.usage.input_tokens


async def test_encoder_service_lease_of_a_dead_worker_expires_and_is_taken_over(redis) -> None:  # type: ignore[no-untyped-def]
    svc = EncoderService(
        redis, ExtractiveEncoder(), ListPublisher(), lease_s=0.5, lease_poll_s=0.05
    )
    seg = make_segment(2)
    await redis.set(f"lychee:enc:lease:{seg.segment_id}", "a-dead-worker", px=500)
    (batch,) = await svc.handle([seg])
    assert batch.records and (await read_usage(redis, "ns"))["ns"]["segments"] == 1


async def test_retention_drops_the_expired_segments_batches_and_their_sessions_contexts(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    from workers.encoder.service import cache_key, context_key, drop_expired

    kept = [cache_key("a/s2/0"), context_key("a", "s2")]
    gone = [cache_key("a/s1/0"), cache_key("a/s1/1"), context_key("a", "s1")]
    for key in kept + gone:
        await redis.set(key, "the user's words")
    assert await drop_expired(redis, ["a/s1/0", "a/s1/1"]) == 3
    assert [await redis.exists(k) for k in gone] == [0, 0, 0]
    assert [await redis.exists(k) for k in kept] == [1, 1]


async def test_encoder_service_publishes_a_slow_segment_before_encoding_the_next(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    """A segment the model took long over is searchable while the rest of its poll is still
    being encoded (it waited for every other segment of the poll, minutes on a small model)."""
    with FakeOpenAI() as server:
        later = reply(record(), note="Ines owns Rex.")
        server.script(slow(1.5, valid(reply(record()))), slow(3.0, valid(later)))
        client = make_client(server.url, None, timeout_s=10.0)
        pub = ListPublisher()
        svc = EncoderService(redis, GuardedLLMEncoder(LLMEncoder(client, "m")), pub)
        running = asyncio.create_task(svc.handle([make_segment(2), second_segment()]))
        await eventually(lambda: batches(pub), what="the first segment's records", timeout_s=10)
        assert not running.done() and len(batches(pub)) == 1
        await running
        await client.close()
    assert [b.segment_id for b in batches(pub)] == ["ns/s1/0", "ns/s1/1"]
