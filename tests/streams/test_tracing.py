"""Traces across the Kafka hops: the embedded stack with the standard OTEL_* environment
pointing at an OTLP/HTTP receiver started here, an exchange added and a search asked through
the gateway, the spans decoded with the OpenTelemetry protobufs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from schemas import Exchange, Role, Turn
from schemas import topics as t
from streams.bench.llm_faults import VALID_REPLY, encoder_env
from streams.kafka.topics import ensure_topics
from streams.stack.embedded import Stack
from tests.conftest import READY, WORKER_ENV, prepare_onnx, wait_log
from tests.fakes.openai_server import FakeOpenAI, valid
from tests.fakes.otlp_receiver import OtlpReceiver, Span
from tests.streams.gateway.conftest import wait_ready
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
NS = "traced"


@dataclass(frozen=True)
class Traced:
    stack: Stack
    receiver: OtlpReceiver
    url: str


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    receiver = OtlpReceiver().start()
    llm = FakeOpenAI(default_reply=valid(VALID_REPLY)).start()
    stack = Stack(tmp_path_factory.mktemp("tracing"))
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: spans leave within a moment
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
    }
    try:
        stack.start_infra()
        asyncio.run(ensure_topics(stack.bootstrap, 4))
        prepare_onnx()
        for stage in ("segmenter", "indexer", "query"):
            stack.start_worker(stage, {**WORKER_ENV, **otel})
        stack.start_worker("encoder", encoder_env(llm.url, {**WORKER_ENV, **otel}))
        gateway = stack.start_gateway({**WORKER_ENV, **otel})
        for stage in READY:
            wait_log(stack, stage, READY[stage])
        wait_ready(stack.gateway_url, gateway)
        yield Traced(stack, receiver, stack.gateway_url)
    finally:
        stack.stop()
        llm.stop()
        receiver.stop()


def one(spans: list[Span], **match: Any) -> Span:
    found = find(spans, **match)
    assert len(found) == 1, (match, found)
    return found[0]


def find(spans: list[Span], **match: Any) -> list[Span]:
    return [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]


def spans_until(
    receiver: OtlpReceiver, what: str, done: Callable[[list[Span]], bool]
) -> list[Span]:
    """The receiver's spans, once `done` holds for them (exports arrive a batch at a time)."""
    return wait_until(receiver.spans, what=what, until=done, timeout_s=240, interval_s=0.25)


def trace_of(spans: list[Span], trace_id: str) -> list[Span]:
    return [s for s in spans if s.trace_id == trace_id]


def child(spans: list[Span], parent: Span, name: str) -> Span:
    """The one span `name` whose parent is `parent` (in whatever process it ran)."""
    return one(spans, name=name, parent_id=parent.span_id, trace_id=parent.trace_id)


def added(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.kind == "SERVER" and s.name.endswith("/exchanges")]


def settled(receiver: OtlpReceiver, what: str, check: Callable[[list[Span]], T]) -> T:
    """`check`'s result once it passes on the spans received (each process exports on its
    own schedule, so a trace arrives in pieces); its own failure when it never does."""

    def passes(got: list[Span]) -> bool:
        try:
            check(got)
        except (AssertionError, KeyError, ValueError):
            return False
        return True

    with contextlib.suppress(AssertionError):
        wait_until(receiver.spans, what=what, until=passes, timeout_s=240, interval_s=0.25)
    return check(receiver.spans())


def check_exchanges(spans: list[Span]) -> list[Span]:
    """One trace per add, from the gateway's request to the indexer's write of its turns;
    returns the two `segmenter.decide` spans."""
    adds = added(spans)
    assert len(adds) == 2 and len({a.trace_id for a in adds}) == 2
    assert all(a.parent_id == "" and a.service == "lychee-gateway" for a in adds)
    decides = []
    for add in adds:
        publish = child(spans, add, "publish memory.exchanges")
        assert publish.service == "lychee-gateway" and publish.kind == "PRODUCER"
        assert publish.attributes["messaging.system"] == "kafka"
        assert publish.attributes["messaging.destination.name"] == t.EXCHANGES
        assert "messaging.kafka.offset" in publish.attributes
        assert "messaging.destination.partition.id" in publish.attributes
        consumed = child(spans, publish, "process memory.exchanges")  # across processes
        assert consumed.service == "lychee-segmenter" and consumed.kind == "CONSUMER"
        assert consumed.attributes["messaging.operation.type"] == "process"
        decide = child(spans, consumed, "segmenter.decide")
        decides.append(decide)
        turns_out = child(spans, decide, "publish memory.turns")
        indexed = child(spans, turns_out, "process memory.turns")
        assert indexed.service == "lychee-indexer"
        writes = find(spans, name="indexer.write", service="lychee-indexer")
        # the write is a child of the batch's first message, linked to the others'
        assert any(
            w.parent_id == indexed.span_id or (indexed.trace_id, indexed.span_id) in w.links
            for w in writes
        )
    assert {d.attributes["lychee.segmenter.action"] for d in decides} <= {"start", "append", "cut"}
    assert any("lychee.segmenter.signal.p_cut" in d.attributes for d in decides)
    return decides


def check_segment(spans: list[Span], decides: list[Span]) -> None:
    """The segment closed by the end request: the encoder's span in that request's trace,
    linked to both exchanges, its LLM call, then the records to the indexer."""
    (encoded,) = find(spans, name="process memory.segments")
    assert encoded.service == "lychee-encoder"
    assert {(d.trace_id, d.span_id) for d in decides} <= set(encoded.links)
    (end,) = find(trace_of(spans, encoded.trace_id), kind="SERVER")
    assert end.name.endswith("/end")
    chat = child(spans, encoded, "chat fake-model")
    assert chat.kind == "CLIENT"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "fake-model"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    records_out = child(spans, encoded, "publish memory.records")
    child(spans, records_out, "process memory.records")


def check_search(spans: list[Span]) -> None:
    """One search, one trace across the request and reply topics."""
    server = one(spans, kind="SERVER", name="POST /v1/namespaces/{namespace}/search")
    search = child(spans, server, "memory.search")
    asked = child(spans, search, "publish memory.queries")
    served = child(spans, asked, "process memory.queries")
    assert served.service == "lychee-query"
    for stage in ("query.plan", "query.recall", "query.selection"):
        child(spans, served, stage)
    recall = child(spans, served, "query.recall")
    assert find(spans, name="query.recall.route", parent_id=recall.span_id)
    assert "lychee.recall.embed_ms" in recall.attributes
    child(spans, child(spans, served, "query.selection"), "query.fusion")
    replied = child(spans, served, "publish memory.replies")
    answered = child(spans, replied, "process memory.replies")
    assert answered.service == "lychee-gateway"


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_tracing_exchange_segment_and_search_are_traces_across_processes(traced: Traced) -> None:
    rx = traced.receiver
    with httpx.Client(base_url=traced.url, timeout=60) as c:
        for eid, text in (("e1", "Noor keeps bees on the library roof."), ("e2", "Two hives.")):
            body = {"exchanges": [{"session_id": "s1", "exchange_id": eid, "turns": [turn(text)]}]}
            r = c.post(f"/v1/namespaces/{NS}/exchanges", json=body)
            assert r.status_code == 202, r.text
        assert c.post(f"/v1/namespaces/{NS}/sessions/s1/end").status_code == 202
    decides = settled(rx, "each exchange's trace to its turns' write", check_exchanges)
    settled(rx, "the segment's trace", lambda got: check_segment(got, decides))

    with httpx.Client(base_url=traced.url, timeout=60) as c:
        r = c.post(f"/v1/namespaces/{NS}/search", json={"query": "Who keeps bees?", "k": 3})
        assert r.status_code == 200, r.text
    settled(rx, "the search's trace", check_search)
    assert rx.refused == 0


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "speaker": "Noor", "content": text}


def exchange(session_id: str) -> Exchange:
    return Exchange(
        namespace=NS,
        session_id=session_id,
        seq=0,
        exchange_id=f"{session_id}:0",
        turns=[Turn(role=Role.user, speaker="Ada", content="The kiln reached 1200 degrees.")],
    )


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_tracing_producer_traceparent_continues_and_garbage_is_ignored(traced: Traced) -> None:
    """A producer's own `traceparent` is the parent of the segmenter's span; a malformed one
    starts a new trace and the exchange is processed all the same."""
    trace_id, span_id = "5" * 32, "6" * 16
    sent = {
        "own": [("traceparent", f"00-{trace_id}-{span_id}-01".encode())],
        "garbage": [("traceparent", b"\xff00-not-a-trace-\x00"), ("tracestate", b"\xfe=\xff")],
    }

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=traced.stack.bootstrap)
        await producer.start()
        try:
            for sid, headers in sent.items():
                ex = exchange(sid)
                value = ex.model_dump_json().encode()
                await producer.send_and_wait(t.EXCHANGES, value, ex.key.encode(), headers=headers)
        finally:
            await producer.stop()

    asyncio.run(produce())

    def indexed(key: str) -> Callable[[list[Span]], bool]:
        def done(got: list[Span]) -> bool:
            roots = find(got, name="process memory.exchanges")
            traces = {
                s.trace_id for s in roots if s.attributes.get("messaging.kafka.message.key") == key
            }
            return any(find(got, name="process memory.turns", trace_id=x) for x in traces)

        return done

    spans = spans_until(traced.receiver, "the producer's trace continued", indexed(f"{NS}/own"))
    own = [
        s
        for s in find(spans, name="process memory.exchanges")
        if s.attributes.get("messaging.kafka.message.key") == f"{NS}/own"
    ]
    assert [(s.trace_id, s.parent_id) for s in own] == [(trace_id, span_id)]

    spans = spans_until(traced.receiver, "the garbage header's exchange", indexed(f"{NS}/garbage"))
    garbage = [
        s
        for s in find(spans, name="process memory.exchanges")
        if s.attributes.get("messaging.kafka.message.key") == f"{NS}/garbage"
    ]
    assert len(garbage) == 1 and garbage[0].parent_id == ""  # a new trace, not an error
    assert garbage[0].status != 2


def test_tracing_without_the_environment_installs_nothing() -> None:
    """No OTEL endpoint: no provider, no exporter thread; the extra missing: one log line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    probe = (
        "import threading, sys\n"
        "from opentelemetry import trace\n"
        "from streams import tracing\n"
        "on = tracing.setup('probe')\n"
        "threads = [t.name for t in threading.enumerate()]\n"
        "print(on, type(trace.get_tracer_provider()).__name__, threads)\n"
    )
    out = run_python(probe, env)
    assert out.startswith("False ProxyTracerProvider") and "OtelBatchSpanProcessor" not in out

    disabled = {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_SDK_DISABLED": "true",
    }
    assert run_python(probe, disabled).startswith("False ProxyTracerProvider")

    asked = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    without_sdk = "import sys\nsys.modules['opentelemetry.sdk'] = None\n" + probe
    out = run_python(without_sdk, asked)
    assert "False ProxyTracerProvider" in out and "tracing.extra_missing" in out


def run_python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout + done.stderr


def test_tracing_code_imports_without_the_extra() -> None:
    """The core install (OpenTelemetry's API only) imports every process's code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    blocked = ("sdk", "exporter", "instrumentation", "proto")
    probe = (
        "import sys\n"
        + "".join(f"sys.modules['opentelemetry.{m}'] = None\n" for m in blocked)
        + "import streams.apps.segmenter, streams.apps.encoder, streams.apps.indexer\n"
        "import streams.apps.query, streams.gateway.app, streams.client, streams.cli\n"
        "from streams import tracing\n"
        "print('imported', tracing.setup('probe'))\n"
    )
    assert run_python(probe, env).strip().endswith("imported False")
