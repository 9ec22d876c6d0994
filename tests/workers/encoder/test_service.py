"""The encoder stage against real Redis: cache, reference context, token counters."""

from __future__ import annotations

import pytest

from schemas import topics as t
from schemas.records import RecordBatch
from tests.fakes.openai_server import FakeOpenAI, text, valid
from tests.workers.encoder.test_llm import make_segment, record, reply
from workers.encoder.adapters import ExtractiveEncoder, GuardedLLMEncoder
from workers.encoder.llm import LLMEncoder
from workers.encoder.service import EncoderService, read_usage
from workers.llm import make_client
from workers.ports import ListPublisher, Unprocessable


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
