"""`lychee bench gateway --tracing`: what tracing costs, the gateway bench run with tracing
off and on, side by side.

Each round runs the bench twice on a new embedded stack: once with the SDK disabled
(`OTEL_SDK_DISABLED=true`, whatever the caller's environment says), once with every process
exporting every span (`parentbased_always_on`) over OTLP/HTTP to a local sink that decodes
and counts them, so the exporter does its whole work (batching, protobuf, HTTP) as it would
against a collector. Figures of several rounds are their medians.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click

from streams.bench.errors import BenchError
from streams.bench.gateway import gateway_bench

OFF = {"OTEL_SDK_DISABLED": "true"}


def tracing_on(endpoint: str) -> dict[str, str]:
    return {
        "OTEL_SDK_DISABLED": "false",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
    }


class SpanSink:
    """An OTLP/HTTP endpoint on loopback that counts the spans posted to it."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.spans = 0
        self.posts = 0
        lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                with lock:
                    sink.spans += n
                    sink.posts += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> SpanSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def tracing_bench(
    n: int, sessions: int, concurrency: int, searches: int, probes: int, rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """`rounds` pairs of runs, off then on; every run's figures by mode."""
    try:
        import opentelemetry.proto  # noqa: F401
        import opentelemetry.sdk  # noqa: F401
    except ImportError as exc:
        raise BenchError(
            f"tracing needs the tracing extra ({exc.name} is missing): "
            "pip install 'lychee-memory[tracing]'"
        ) from exc
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for r in range(rounds):
        for mode in ("off", "on"):
            click.echo(f"round {r + 1}/{rounds}: tracing {mode} ...", err=True)
            with SpanSink() as sink:
                env = OFF if mode == "off" else tracing_on(sink.url)
                result = gateway_bench(n, sessions, concurrency, searches, probes, env, show=False)
            # the processes are stopped: their exporters flushed on the way out
            runs[mode].append({**result, "spans": sink.spans})
    print_tracing(runs)
    return runs


ROWS: list[tuple[str, str, Callable[[dict[str, Any]], float]]] = [
    ("adds/s (to the 202)", "{:.0f}", lambda r: r["adds_per_s"]),
    ("ingest, exchanges/s to searchable", "{:.1f}", lambda r: r["searchable_per_s"]),
    ("add p95, ms", "{:.1f}", lambda r: r["add_ms"]["p95"]),
    ("add + search(wait_for) p95, ms", "{:.1f}", lambda r: r["read_your_writes_ms"]["p95"]),
    ("search p50, ms", "{:.1f}", lambda r: r["search_ms"]["p50"]),
    ("search p95, ms", "{:.1f}", lambda r: r["search_ms"]["p95"]),
    ("spans exported", "{:.0f}", lambda r: r["spans"]),
]


def print_tracing(runs: dict[str, list[dict[str, Any]]]) -> None:
    first = runs["off"][0]
    click.echo(
        f"{first['adds']} adds ({first['sessions']} sessions, {first['concurrency']} callers), "
        f"{first['probes']} add+search probes, {first['searches']} searches; "
        f"{len(runs['off'])} round(s), medians"
    )
    click.echo(f"{'':36}{'off':>10}{'on':>10}{'on/off':>9}")
    for label, fmt, value in ROWS:
        off = statistics.median(value(r) for r in runs["off"])
        on = statistics.median(value(r) for r in runs["on"])
        ratio = f"{on / off:.2f}" if off else "-"
        click.echo(f"{label:36}{fmt.format(off):>10}{fmt.format(on):>10}{ratio:>9}")
    if len(runs["off"]) > 1:  # the spread behind the medians, run by run
        click.echo("each run, in order (off, on, off, on, ...):")
        for label, fmt, value in ROWS[:-1]:
            each = [
                fmt.format(value(r))
                for pair in zip(runs["off"], runs["on"], strict=True)
                for r in pair
            ]
            click.echo(f"  {label:34}{' '.join(each)}")
