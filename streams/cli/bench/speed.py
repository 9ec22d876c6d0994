"""`lychee bench` commands for rates and latencies: ingest throughput, retrieval latency,
queries under load, the local embedder's backends and the HTTP gateway."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import click

from streams.cli.bench.options import COUNT, Counts, K, data_file
from streams.cli.common import settings


@click.command("throughput")
@click.option("--exchanges", "n", type=COUNT, default=2000, show_default=True)
@click.option("--sessions", type=COUNT, default=20, show_default=True)
@click.option(
    "--probes", type=COUNT, default=100, show_default=True, help="exchanges timed to searchable"
)
@click.option(
    "--stack",
    "stacks",
    type=click.Choice(["durable", "ephemeral", "durable-everysec"]),
    multiple=True,
    default=("durable", "ephemeral"),
    show_default=True,
    help="embedded stack presets measured one after the other (repeat the option)",
)
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="LoCoMo-layout file: its first N exchanges and probes drawn from it, not synthetic ones",
)
@click.option(
    "--probe-rate",
    type=click.FloatRange(min=0.1, max=200),
    default=20.0,
    show_default=True,
    help="probes sent per second",
)
def bench_throughput(
    n: int,
    sessions: int,
    probes: int,
    stacks: tuple[str, ...],
    data: Path | None,
    probe_rate: float,
) -> None:
    """Exchanges/s end to end vs raw embedding rate; produce-to-searchable p50/p95; per stack
    preset (durable: broker on S3 and Redis fsync always; ephemeral: all in memory)."""
    from streams.bench.throughput import throughput
    from streams.stack.embedded import PRESETS

    settings()
    throughput(n, sessions, probes, tuple(PRESETS[name] for name in stacks), data, probe_rate)


@click.command("latency")
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="LoCoMo file: time retrieval on one conversation ingested through the pipeline",
)
@click.option("--conversation", default=None, help="sample id (default: the first)")
@click.option(
    "--synthetic",
    "records",
    type=click.IntRange(min=1),
    default=None,
    help="time retrieval on a synthetic store of this many records (e.g. 1000000)",
)
@click.option("--namespaces", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="directory of the synthetic store, reused when it holds the same shape "
    "(default: a temporary directory, removed afterwards)",
)
@click.option("-k", "k", type=K, default=10, show_default=True)
@click.option(
    "--beside",
    default=None,
    help="another sample id of --data: ingested meanwhile, its own namespace, while the "
    "questions are asked again (one tenant asking while another writes)",
)
def bench_latency(
    data: Path | None,
    conversation: str | None,
    records: int | None,
    namespaces: int,
    store: Path | None,
    k: int,
    beside: str | None,
) -> None:
    """Retrieval latency p50/p95 (no LLM): on a LoCoMo conversation (with the request/reply
    round trip) and/or on a synthetic store of production size with its ANN indexes."""
    from streams.bench.errors import BenchError
    from streams.bench.latency import print_synthetic, run_latency, run_synthetic

    if data is None and records is None:
        raise click.UsageError("give --data (LoCoMo scale), --synthetic N (store scale), or both")
    if beside is not None and data is None:
        raise click.UsageError("--beside is another conversation of --data")
    try:
        if data is not None:
            run_latency(settings(), data, conversation, k, beside)
        if records is not None:
            with contextlib.ExitStack() as stack:
                path = store or Path(stack.enter_context(tempfile.TemporaryDirectory()))
                print_synthetic(run_synthetic(settings(), records, namespaces, k, path))
    except (BenchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("query-load")
@data_file
@click.option("--conversation", default=None, help="sample id (default: the first)")
@click.option(
    "--concurrency",
    "levels",
    type=Counts(),
    default="1,4,16",
    show_default=True,
    help="comma-separated numbers of requests in flight",
)
@click.option("-k", "k", type=K, default=10, show_default=True)
@click.option(
    "--questions",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="at most this many distinct questions per level",
)
def bench_query_load(
    data: Path, conversation: str | None, levels: tuple[int, ...], k: int, questions: int
) -> None:
    """Questions/s and client round-trip p50/p95 at each concurrency, on one LoCoMo-format
    conversation ingested through the pipeline (embedded stack unless Kafka is configured)."""
    from streams.bench.errors import BenchError
    from streams.bench.query_load import run_query_load

    try:
        run_query_load(settings(), data, conversation, levels, k, questions)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("embedder")
@data_file
@click.option("--backends", default="torch,onnx,onnx-int8", show_default=True)
@click.option("--texts", "texts_n", type=click.IntRange(min=8), default=320, show_default=True)
@click.option("--singles", type=click.IntRange(min=1), default=48, show_default=True)
@click.option("--batch-sizes", "sizes", type=Counts(), default="64,32", show_default=True)
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True)
def bench_embedder(
    data: Path,
    backends: str,
    texts_n: int,
    singles: int,
    sizes: tuple[int, ...],
    rounds: int,
) -> None:
    """Local MiniLM backends interleaved: texts/s batched and single, ratios to torch, and
    each backend's vectors against torch's on distinct turn texts of a LoCoMo-format file."""
    from streams.bench.embedder import BACKENDS, print_embedder_bench, run_embedder_bench

    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise click.BadParameter(f"{backends!r}: choose from {', '.join(BACKENDS)}")
    s = settings()
    print_embedder_bench(
        run_embedder_bench(data, chosen, texts_n, singles, sizes, rounds, s.embedding.onnx_dir)
    )


@click.command("gateway")
@click.option("--adds", "n", type=COUNT, default=2000, show_default=True, help="exchanges added")
@click.option("--sessions", type=COUNT, default=20, show_default=True)
@click.option("--concurrency", type=COUNT, default=64, show_default=True, help="callers at once")
@click.option("--searches", type=COUNT, default=200, show_default=True)
@click.option("--probes", type=COUNT, default=50, show_default=True, help="add+search probes")
@click.option(
    "--tracing",
    is_flag=True,
    help="run with OpenTelemetry tracing off and on (to a local OTLP sink), side by side",
)
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True)
def bench_gateway(
    n: int, sessions: int, concurrency: int, searches: int, probes: int, tracing: bool, rounds: int
) -> None:
    """Gateway add latency (time to the 202) and search round trip p50/p95, over HTTP against
    an embedded stack; with --tracing, ingest rate and query p95 with tracing off and on."""
    from streams.bench.errors import BenchError
    from streams.bench.gateway import gateway_bench
    from streams.bench.tracing import tracing_bench

    settings()
    if not tracing:
        gateway_bench(n, sessions, concurrency, searches, probes)
        return
    try:
        tracing_bench(n, sessions, concurrency, searches, probes, rounds)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
