"""`lychee bench gateway --tracing`: the sink counts what the SDK's OTLP/HTTP exporter sends,
and the side-by-side table reads the runs' figures."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from streams.bench.tracing import OFF, SpanSink, print_tracing, tracing_on


def test_span_sink_counts_the_spans_the_exporter_posts() -> None:
    with SpanSink() as sink:
        provider = TracerProvider()  # not the global one: nothing else in the process changes
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{sink.url}/v1/traces"))
        )
        tracer = provider.get_tracer("test")
        for i in range(5):
            with tracer.start_as_current_span(f"s{i}"):
                pass
        assert provider.force_flush(10_000)
        provider.shutdown()
    assert sink.spans == 5 and sink.posts >= 1


def test_modes_disable_or_export_everything() -> None:
    assert OFF == {"OTEL_SDK_DISABLED": "true"}
    on = tracing_on("http://127.0.0.1:1")
    assert on["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:1"
    assert on["OTEL_TRACES_SAMPLER"] == "parentbased_always_on"
    assert on["OTEL_SDK_DISABLED"] == "false"


def run(adds_per_s: float, search_p95: float, spans: int) -> dict[str, Any]:
    ms = {"p50": 1.0, "p95": search_p95}
    return {
        "adds": 10,
        "sessions": 2,
        "concurrency": 4,
        "probes": 3,
        "searches": 5,
        "adds_per_s": adds_per_s,
        "searchable_per_s": adds_per_s / 2,
        "add_ms": ms,
        "read_your_writes_ms": ms,
        "search_ms": ms,
        "spans": spans,
    }


def test_print_tracing_shows_medians_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    print_tracing(
        {
            "off": [run(100, 10.0, 0), run(90, 30.0, 0), run(110, 20.0, 0)],
            "on": [run(80, 22.0, 900), run(70, 26.0, 1000), run(75, 24.0, 950)],
        }
    )
    out = capsys.readouterr().out
    assert "3 round(s), medians" in out
    search = next(line for line in out.splitlines() if line.startswith("search p95"))
    assert search.split()[-3:] == ["20.0", "24.0", "1.20"]
    spans = next(line for line in out.splitlines() if line.startswith("spans exported"))
    assert spans.split()[-3:] == ["0", "950", "-"]
