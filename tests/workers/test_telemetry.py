"""Spans and W3C trace context through the OpenTelemetry API: off without a provider,
foreign headers never an error, one span per message of a batch, GenAI attributes on an LLM
call. The SDK's in-memory exporter stands in for a collector."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from tests.fakes.openai_server import FakeOpenAI, text
from workers import telemetry
from workers.llm.calls import ChatCaller, make_client

TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
VALID = (("traceparent", f"00-{TRACE_ID}-{SPAN_ID}-01".encode()), ("tracestate", b"k=v"))
GARBAGE = [
    (("traceparent", b"garbage"),),
    (("traceparent", b"\xff\xfe\x00"),),
    (("traceparent", b""),),
    (("traceparent", b"00-" + b"0" * 32 + b"-" + b"0" * 16 + b"-01"),),  # all-zero ids
    (("traceparent", b"00-zz" + b"a" * 30 + b"-00f067aa0ba902b7-01"),),
    (("traceparent", b"ff-" + TRACE_ID.encode() + b"-" + SPAN_ID.encode() + b"-01"),),
    (("tracestate", b"k=v"),),  # a state without a parent
    (("traceparent", 7),),  # not even bytes
]


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    """A tracer provider for this test only (the API lets a process set one once)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = before
        provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_telemetry_without_a_provider_adds_no_header_and_no_span() -> None:
    assert not telemetry.active()
    lineage = (("lychee-src", b"0:1"),)
    assert telemetry.inject(lineage) == lineage
    assert telemetry.parent(VALID) is None
    assert telemetry.traceparent() is None
    with telemetry.consumed("memory.exchanges", VALID, 0, 1) as span:
        assert span is trace.INVALID_SPAN
        assert telemetry.inject() == ()


@pytest.mark.parametrize("headers", GARBAGE)
def test_telemetry_garbage_traceparent_is_ignored(
    exported: InMemorySpanExporter, headers: tuple[tuple[str, bytes], ...]
) -> None:
    assert telemetry.parent(headers) is None
    with telemetry.consumed("memory.exchanges", headers, 2, 40):
        pass
    (span,) = named(exported, "process memory.exchanges")
    assert span.parent is None  # a new trace
    assert span.status.is_ok


def test_telemetry_first_header_of_a_name_wins_even_when_garbage(
    exported: InMemorySpanExporter,
) -> None:
    assert telemetry.parent((("traceparent", b"garbage"), VALID[0])) is None
    assert telemetry.parent((VALID[0], ("traceparent", b"garbage"))) is not None


def test_telemetry_consumed_span_continues_the_producer_trace_and_is_carried_on(
    exported: InMemorySpanExporter,
) -> None:
    with telemetry.consumed("memory.queries", VALID, 3, 17) as span:
        carried = dict(telemetry.inject((("lychee-src", b"3:17"), ("traceparent", b"old"))))
        own = span.get_span_context()
    (done,) = named(exported, "process memory.queries")
    assert done.parent is not None and done.parent.span_id == int(SPAN_ID, 16)
    assert done.context.trace_id == int(TRACE_ID, 16)
    assert done.kind is trace.SpanKind.CONSUMER
    assert done.attributes is not None
    assert done.attributes["messaging.system"] == "kafka"
    assert done.attributes["messaging.destination.name"] == "memory.queries"
    assert done.attributes["messaging.destination.partition.id"] == "3"
    assert done.attributes["messaging.kafka.offset"] == 17
    assert carried["lychee-src"] == b"3:17"
    assert carried["traceparent"] == f"00-{TRACE_ID}-{own.span_id:016x}-01".encode()
    assert carried["tracestate"] == b"k=v"


def test_telemetry_batch_one_span_per_message_and_the_write_linked_to_all(
    exported: InMemorySpanExporter,
) -> None:
    other = f"00-{'1' * 32}-{'2' * 16}-01".encode()
    messages = [
        telemetry.Consumed(VALID, 0, 5),
        telemetry.Consumed((("traceparent", other),), 1, 6),
        telemetry.Consumed((("traceparent", b"garbage"),), 1, 7),
    ]
    with telemetry.batch("memory.turns", "indexer.write", messages):
        pass
    processed = named(exported, "process memory.turns")
    (write,) = named(exported, "indexer.write")
    assert [s.context.trace_id for s in processed[:2]] == [int(TRACE_ID, 16), int("1" * 32, 16)]
    assert processed[2].parent is None
    assert write.parent is not None and write.parent.span_id == processed[0].context.span_id
    assert [link.context.span_id for link in write.links] == [
        s.context.span_id for s in processed[1:]
    ]
    assert all(s.end_time is not None and s.end_time >= write.end_time for s in processed)


def test_telemetry_links_skip_what_names_no_context(exported: InMemorySpanExporter) -> None:
    tp = f"00-{TRACE_ID}-{SPAN_ID}-01"
    found = telemetry.links([tp, None, "garbage", tp, ""])
    assert [(x.context.trace_id, x.context.span_id) for x in found] == [
        (int(TRACE_ID, 16), int(SPAN_ID, 16))
    ]


class _Caller(ChatCaller):
    json_mode = False


async def test_chat_span_has_the_genai_attributes(exported: InMemorySpanExporter) -> None:
    with FakeOpenAI(default_reply=text("Noor keeps bees.")) as server:
        caller = _Caller(make_client(server.url, "key", 10), "fake-model")
        done = await caller._call([{"role": "user", "content": "Who?"}], random.Random(0))
    assert done.text == "Noor keeps bees."
    (span,) = named(exported, "chat fake-model")
    attrs = span.attributes or {}
    assert span.kind is trace.SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.system"] == "openai"
    assert attrs["gen_ai.request.model"] == "fake-model"
    assert attrs["gen_ai.usage.input_tokens"] == done.prompt_tokens
    assert attrs["gen_ai.usage.output_tokens"] == done.completion_tokens
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert 0 <= attrs["gen_ai.response.time_to_first_chunk"] <= done.seconds
    assert attrs["server.address"] == "127.0.0.1"
