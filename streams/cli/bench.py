"""`lychee bench`: the benchmarks, each printing its figures."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Literal

import click
import orjson

from streams.bench.harness import VARIANTS
from streams.cli.common import settings
from streams.settings import llm_configured


@click.group()
def bench() -> None:
    """Benchmarks that print figures."""


@bench.command("throughput")
@click.option("--exchanges", "n", type=int, default=2000, show_default=True)
@click.option("--sessions", type=int, default=20, show_default=True)
@click.option(
    "--probes", type=int, default=100, show_default=True, help="exchanges timed to searchable"
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
def bench_throughput(n: int, sessions: int, probes: int, stacks: tuple[str, ...]) -> None:
    """Exchanges/s end to end vs raw embedding rate; produce-to-searchable p50/p95; per stack
    preset (durable: broker on S3 and Redis fsync always; ephemeral: all in memory)."""
    from streams.bench.throughput import throughput
    from streams.stack.embedded import PRESETS

    settings()
    throughput(n, sessions, probes, tuple(PRESETS[name] for name in stacks))


@bench.command("durability")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--conversation", default=None, help="sample id (default: the first)")
@click.option(
    "--mode",
    "modes",
    type=click.Choice(["kill", "ctrl-c"]),
    multiple=True,
    default=("kill", "ctrl-c"),
    show_default=True,
    help="how lychee up is stopped half way (repeat for both)",
)
@click.option(
    "--baselines",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="undisturbed runs (two measure the noise between runs)",
)
@click.option("--at", type=click.FloatRange(0.05, 0.95), default=0.5, show_default=True)
def bench_durability(
    data: Path, conversation: str | None, modes: tuple[str, ...], baselines: int, at: float
) -> None:
    """kill -9 (or Ctrl-C) lychee up half way through a LoCoMo conversation, start it again on
    the same data directory: turns indexed vs produced, records and nodes vs undisturbed runs,
    dead letters, processes left of the first run."""
    from streams.bench.durability import durability
    from streams.bench.errors import BenchError

    settings()
    try:
        durability(data, conversation, modes, baselines, at)  # type: ignore[arg-type]
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--conversations", default=None, help="comma-separated sample ids (default: all)")
@click.option("--variant", default="full", show_default=True, type=click.Choice(list(VARIANTS)))
@click.option("--k", "ks", default="5,10,15", show_default=True)
@click.option("--budgets", default="500,1000,2000", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--dump",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="every reply's evidence as JSON, for python -m streams.bench.compare",
)
@click.option(
    "--answer",
    is_flag=True,
    help="generate answers and grade them by the LoCoMo judge protocol (needs an LLM)",
)
@click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")
@click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")
@click.option(
    "--also",
    multiple=True,
    type=click.Choice(list(VARIANTS)),
    help="a per-request variant (retrieval ablation) asked over the same ingest, "
    "reported as lychee:<name>; repeatable",
)
def bench_locomo(
    data: Path,
    conversations: str | None,
    variant: str,
    ks: str,
    budgets: str,
    out: Path | None,
    plot: Path | None,
    answer: bool,
    judge_base_url: str | None,
    judge_model: str | None,
    also: tuple[str, ...],
    dump: Path | None,
) -> None:
    """Evidence recall by category, cost and latency on LoCoMo, with raw-turn baselines.

    Uses the configured Kafka/Redis/LanceDB, or starts the embedded stack when
    LYCHEE_KAFKA_BOOTSTRAP is not set.
    """
    from streams.bench.errors import BenchError
    from streams.bench.judging import judge_target
    from streams.bench.locomo import run_locomo
    from workers.evaluation.report import format_table

    s = settings()
    try:
        if answer and not llm_configured(s):
            raise BenchError("--answer needs an LLM: set LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL")
        judge = judge_target(s, judge_base_url, judge_model) if answer else None
        report = run_locomo(
            s,
            data,
            conversations.split(",") if conversations else None,
            variant,
            tuple(int(x) for x in ks.split(",")),
            tuple(int(x) for x in budgets.split(",")),
            also=also,
            judge=judge,
            dump=dump,
        )
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_table(report))
    if out:
        out.write_bytes(orjson.dumps(report.to_json_dict(), option=orjson.OPT_INDENT_2))
        click.echo(f"report: {out}")
    if dump:
        click.echo(f"replies: {dump}")
    if plot:
        from workers.evaluation.plot import plot_recall_vs_budget

        plot_recall_vs_budget(report, plot)
        click.echo(f"plot: {plot}")


@bench.command("llm")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["locomo", "jsonl"]),
    default=None,
    help="default: jsonl for a .jsonl file, else locomo",
)
@click.option("--conversation", default=None, help="sample id or namespace (default: the first)")
@click.option("--segments", "segments_n", type=click.IntRange(min=1), default=10, show_default=True)
@click.option(
    "--questions",
    "questions_n",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="the file's questions whose evidence was encoded",
)
@click.option("--ask", "asks", multiple=True, help="a question of your own (repeatable)")
@click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")
@click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--redact",
    is_flag=True,
    help="print no question, answer or gold text (data whose licence forbids copies)",
)
def bench_llm(
    data: Path,
    fmt: str | None,
    conversation: str | None,
    segments_n: int,
    questions_n: int,
    asks: tuple[str, ...],
    judge_base_url: str | None,
    judge_model: str | None,
    out: Path | None,
    redact: bool,
) -> None:
    """The LLM path against the configured endpoint: the encoder over a conversation's first
    segments, then the LLM planner and answerer over its questions (or --ask), judged by the
    LoCoMo protocol; seconds, tokens and tokens/s per segment, outcomes, answers."""
    from streams.bench.errors import BenchError
    from streams.bench.llm import bench_llm as run

    try:
        run(
            settings(),
            data,
            fmt,
            conversation,
            segments_n,
            questions_n,
            asks,
            (judge_base_url, judge_model),
            out,
            click.echo,
            redact,
        )
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("longmemeval")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option(
    "--granularity", type=click.Choice(["session", "turn"]), default="turn", show_default=True
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def bench_longmemeval(
    data: Path, granularity: Literal["session", "turn"], out: Path | None
) -> None:
    """Official LongMemEval retrieval metrics (recall_any/all@k, ndcg_any@k), _abs skipped."""
    from streams.bench.longmemeval import run_longmemeval
    from workers.evaluation.report import format_longmemeval_table

    report = run_longmemeval(settings(), data, granularity)
    click.echo(format_longmemeval_table(report))
    if out:
        out.write_bytes(orjson.dumps(report.to_json_dict(), option=orjson.OPT_INDENT_2))
        click.echo(f"report: {out}")


@bench.command("latency")
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
@click.option("-k", "k", type=int, default=10, show_default=True)
def bench_latency(
    data: Path | None,
    conversation: str | None,
    records: int | None,
    namespaces: int,
    store: Path | None,
    k: int,
) -> None:
    """Retrieval latency p50/p95 (no LLM): on a LoCoMo conversation (with the request/reply
    round trip) and/or on a synthetic store of production size with its ANN indexes."""
    from streams.bench.errors import BenchError
    from streams.bench.latency import print_synthetic, run_latency, run_synthetic

    if data is None and records is None:
        raise click.UsageError("give --data (LoCoMo scale), --synthetic N (store scale), or both")
    try:
        if data is not None:
            run_latency(settings(), data, conversation, k)
        if records is not None:
            with contextlib.ExitStack() as stack:
                path = store or Path(stack.enter_context(tempfile.TemporaryDirectory()))
                print_synthetic(run_synthetic(settings(), records, namespaces, k, path))
    except (BenchError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("embedder")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--backends", default="torch,onnx,onnx-int8", show_default=True)
@click.option("--texts", "texts_n", type=click.IntRange(min=8), default=320, show_default=True)
@click.option("--singles", type=click.IntRange(min=1), default=48, show_default=True)
@click.option("--batch-sizes", default="64,32", show_default=True)
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True)
def bench_embedder(
    data: Path, backends: str, texts_n: int, singles: int, batch_sizes: str, rounds: int
) -> None:
    """Local MiniLM backends interleaved: texts/s batched and single, ratios to torch, and
    each backend's vectors against torch's on distinct turn texts of a LoCoMo-format file."""
    from streams.bench.embedder import BACKENDS, print_embedder_bench, run_embedder_bench

    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        raise click.BadParameter(f"{backends!r}: choose from {', '.join(BACKENDS)}")
    sizes = tuple(int(x) for x in batch_sizes.split(","))
    s = settings()
    print_embedder_bench(
        run_embedder_bench(data, chosen, texts_n, singles, sizes, rounds, s.embedding_onnx_dir)
    )


@bench.command("query-load")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--conversation", default=None, help="sample id (default: the first)")
@click.option(
    "--concurrency",
    "levels",
    default="1,4,16",
    show_default=True,
    help="comma-separated numbers of requests in flight",
)
@click.option("-k", "k", type=int, default=10, show_default=True)
@click.option(
    "--questions",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="at most this many distinct questions per level",
)
def bench_query_load(
    data: Path, conversation: str | None, levels: str, k: int, questions: int
) -> None:
    """Questions/s and client round-trip p50/p95 at each concurrency, on one LoCoMo-format
    conversation ingested through the pipeline (embedded stack unless Kafka is configured)."""
    from streams.bench.errors import BenchError
    from streams.bench.query_load import run_query_load

    try:
        concurrency = tuple(int(x) for x in levels.split(","))
    except ValueError as exc:
        raise click.BadParameter(f"{levels!r}: expected numbers like 1,4,16") from exc
    if any(n < 1 for n in concurrency):
        raise click.BadParameter(f"{levels!r}: every concurrency must be >= 1")
    try:
        run_query_load(settings(), data, conversation, concurrency, k, questions)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("fuzz")
@click.option("--messages", "n", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--seed", type=int, default=11, show_default=True)
def bench_fuzz(n: int, seed: int) -> None:
    """Hostile input on every input topic (librdkafka and aiokafka, every codec), interleaved
    with good exchanges and queries, on the embedded stack: what was dead-lettered and why,
    what was answered, what was lost (must be 0), whether every stage is still up."""
    from streams.bench.fuzz import format_report, run_fuzz

    settings()
    report = run_fuzz(n, seed)
    click.echo(format_report(report))
    if report.lost or report.mismatched or "NO" in report.stages_alive:
        raise click.ClickException("hostile input was lost or mishandled (see above)")


@bench.command("llm-outage")
@click.option("--outage-s", type=float, default=90.0, show_default=True, help="seconds of 503s")
@click.option(
    "--rate-limit-s",
    type=float,
    default=30.0,
    show_default=True,
    help="then seconds of 429s with Retry-After",
)
@click.option("--refused-s", type=float, default=0.0, show_default=True, help="then 401s")
@click.option("--segments", type=click.IntRange(min=1), default=6, show_default=True)
def bench_llm_outage(outage_s: float, rate_limit_s: float, refused_s: float, segments: int) -> None:
    """The encoder against an LLM endpoint that fails, then recovers: pauses, resumes, dead
    letters (must be 0), calls and token counters per segment (must be 1 each).

    The endpoint is the scripted fake of the test suite (tests/fakes/openai_server.py): run it
    from a source checkout.
    """
    checkout = Path(__file__).resolve().parents[2]  # an editable install's source tree
    if (checkout / "tests" / "fakes").is_dir() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))
    try:
        from tests.fakes.openai_server import FakeOpenAI, status, valid
    except ImportError as exc:
        raise click.ClickException(
            "the fake LLM endpoint lives in tests/fakes: install from a source checkout"
        ) from exc
    from streams.bench.llm_faults import VALID_REPLY, format_report, run_llm_faults

    settings()
    phases = [(outage_s, status(503, {})), (rate_limit_s, status(429, {"Retry-After": "5"}))]
    if refused_s:
        phases.append((refused_s, status(401, {})))
    with FakeOpenAI(default_reply=valid(VALID_REPLY)) as server:
        report = run_llm_faults(server, [p for p in phases if p[0] > 0], segments)
    click.echo(format_report(report))


@bench.command("chaos")
@click.option("--kills", type=click.IntRange(min=0), default=20, show_default=True)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="workers per ingest stage (segmenter, encoder, indexer)",
)
@click.option(
    "--interval",
    "interval_s",
    type=float,
    default=4.0,
    show_default=True,
    help="mean seconds between kills",
)
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="a LoCoMo file; default: a synthetic conversation",
)
@click.option("--conversation", "conversation_id", default=None, help="sample id in --data")
@click.option("--sessions", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--per-session", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--stack",
    "preset",
    type=click.Choice(["durable", "ephemeral"]),
    default="durable",
    show_default=True,
    help="durable: Redis and the broker are killed -9 once each as well",
)
@click.option(
    "--undisturbed",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="clean ingests first, for the record-set Jaccard and its noise floor",
)
def bench_chaos(
    kills: int,
    processes: int,
    interval_s: float,
    data: Path | None,
    conversation_id: str | None,
    sessions: int,
    per_session: int,
    seed: int,
    preset: str,
    undisturbed: int,
) -> None:
    """Ingest while random ingest workers (and on the durable stack Redis and the broker) are
    killed -9 and restarted: lost and duplicated turns, exchanges in no or two segments,
    encodes against segments, record-set Jaccard against undisturbed runs, dead letters."""
    import uuid

    from streams.bench.chaos import format_report, run_chaos, synthetic

    settings()
    if data is not None:
        from workers.datasets import load_locomo

        convs = load_locomo(data)
        chosen = [c for c in convs if conversation_id in (None, c.namespace)]
        if not chosen:
            raise click.ClickException(f"no conversation {conversation_id!r} in {data}")
        exchanges = list(chosen[0].exchanges)
    else:
        exchanges = synthetic(f"chaos-{uuid.uuid4().hex[:6]}", sessions, per_session)
    report = run_chaos(
        exchanges,
        kills=kills,
        processes=processes,
        interval_s=interval_s,
        seed=seed,
        durable=preset == "durable",
        undisturbed=undisturbed,
    )
    click.echo("\n".join(report.kill_log))
    click.echo(format_report(report))


@bench.command("segmentation")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
def bench_segmentation(data: Path) -> None:
    """Segments and turns per segment on a LoCoMo file, for the configured segmenter."""
    from streams.bench.segmentation import segmentation

    segmentation(settings(), data)


@bench.command("gateway")
@click.option("--adds", "n", type=int, default=2000, show_default=True, help="exchanges added")
@click.option("--sessions", type=int, default=20, show_default=True)
@click.option("--concurrency", type=int, default=64, show_default=True, help="callers at once")
@click.option("--searches", type=int, default=200, show_default=True)
def bench_gateway(n: int, sessions: int, concurrency: int, searches: int) -> None:
    """Gateway add latency (time to the 202) and search round trip p50/p95, over HTTP against
    an embedded stack."""
    from streams.bench.gateway import gateway_bench

    settings()
    gateway_bench(n, sessions, concurrency, searches)
