"""`lychee`: the embedded stack, one stage, ingest, ask, status and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import click
import orjson

from streams.apps import STAGES
from streams.bench.harness import VARIANTS
from streams.logs import configure
from streams.settings import Settings, llm_configured


def _settings() -> Settings:
    s = Settings()
    configure(s.log_level, s.log_format)
    return s


def _client_settings() -> Settings:
    """Settings for a command that is a Kafka client: the configured stack, or the running
    `lychee up` when no LYCHEE_* connection variable is set (streams.stack.endpoints). The
    client library's own error lines are silenced: a failure is reported once, as one line
    (`expected_error`)."""
    import logging

    from streams.stack.endpoints import client_settings

    s = client_settings()
    configure(s.log_level, s.log_format)
    for name in ("aiokafka", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return s


class Unavailable(click.ClickException):
    """Kafka or Redis cannot be reached (exit code 3)."""

    exit_code = 3


class TimedOut(click.ClickException):
    """The work did not finish within its time budget (exit code 4)."""

    exit_code = 4


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 400 else text[:400] + "..."


def expected_error(exc: BaseException) -> click.ClickException | None:
    """The one-line error (and exit code) for a condition a user can meet and fix; None for
    anything else, which is a bug and keeps its traceback."""
    from aiokafka.errors import KafkaConnectionError, KafkaError
    from pydantic import ValidationError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError

    from schemas.errors import LycheeError

    if isinstance(exc, KafkaConnectionError) or (
        isinstance(exc, KafkaError) and getattr(exc, "retriable", False)
    ):
        return Unavailable(
            f"cannot reach Kafka ({_one_line(exc)}); is `lychee up` running, and does "
            "LYCHEE_KAFKA_BOOTSTRAP point at it?"
        )
    if isinstance(exc, RedisConnectionError):
        return Unavailable(
            f"cannot reach Redis ({_one_line(exc)}); check LYCHEE_REDIS_URL or `lychee up`"
        )
    if isinstance(exc, TimeoutError):
        return TimedOut(f"timed out: {_one_line(exc)}")
    if isinstance(exc, ValidationError):
        return click.ClickException(f"invalid settings or input: {_one_line(exc)}")
    if isinstance(exc, KafkaError | RedisError | LycheeError | ValueError | OSError):
        return click.ClickException(f"{type(exc).__name__}: {_one_line(exc)}")
    return None


class LycheeGroup(click.Group):
    """Turns the conditions a user meets (broker down, timeouts, bad files) into one-line
    errors with exit codes (1 error, 2 usage, 3 unavailable, 4 timed out): no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            mapped = expected_error(exc)
            if mapped is None:
                raise
            raise mapped from exc


@click.group(cls=LycheeGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Streaming long-term memory for LLM agents."""


@main.command()
@click.option(
    "--data-dir", type=click.Path(path_type=Path), default=Path(".lychee"), show_default=True
)
@click.option("--kafka-port", type=int, default=9092, show_default=True, help="0 picks a free port")
@click.option("--redis-port", type=int, default=6379, show_default=True, help="0 picks a free port")
@click.option(
    "--ephemeral",
    is_flag=True,
    help="broker in memory and Redis without persistence: nothing queued survives a stop",
)
@click.option(
    "--grace",
    "grace_s",
    type=click.FloatRange(min=0),
    default=None,
    help="seconds Ctrl-C lets the stages drain [default: LYCHEE_DRAIN_GRACE_S, 60]",
)
@click.option("--gateway-port", type=int, default=8080, show_default=True,
              help="the HTTP gateway on loopback; 0 picks a free port, -1 starts none")  # fmt: skip
def up(
    data_dir: Path,
    kafka_port: int,
    redis_port: int,
    ephemeral: bool,
    grace_s: float | None,
    gateway_port: int,
) -> None:
    """Start SeaweedFS, broker, Redis, every worker and the HTTP gateway on loopback and
    supervise them; Ctrl-C drains the stages and stops everything. Restarting on the same
    data directory resumes where the stack stopped."""
    from streams.stack.embedded import DURABLE, EPHEMERAL, StackError
    from streams.stack.launcher import run_up

    s = _settings()
    if grace_s is not None:
        s = s.model_copy(update={"drain_grace_s": grace_s})
    try:
        code = run_up(
            data_dir.resolve(),
            EPHEMERAL if ephemeral else DURABLE,
            s,
            kafka_port,
            redis_port,
            None if gateway_port < 0 else gateway_port,
        )
    except StackError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(code)


@main.command()
@click.argument("stage", type=click.Choice(STAGES))
def worker(stage: str) -> None:
    """Run one stage against the configured Kafka, Redis and LanceDB."""
    from streams.apps import run_worker

    run_worker(stage, _settings())


@main.group()
def topics() -> None:
    """Topic administration."""


@topics.command("create")
def topics_create() -> None:
    """Create missing topics with the configured partition count (idempotent)."""
    from streams.topics import ensure_topics, topic_retention

    s = _client_settings()
    created = asyncio.run(
        ensure_topics(
            s.kafka_bootstrap, s.topic_partitions, s.topic_replication, topic_retention(s)
        )
    )
    click.echo(f"created {len(created)} topics" + (f": {', '.join(created)}" if created else ""))


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["locomo", "jsonl"]), required=True)
@click.option(
    "--namespace", default=None, help="override the namespace (one sample/namespace only)"
)
@click.option("--wait/--no-wait", default=False, help="return when everything produced is indexed")
@click.option("--timeout", "timeout_s", type=float, default=900.0, show_default=True)
def ingest(file: Path, fmt: str, namespace: str | None, wait: bool, timeout_s: float) -> None:
    """Produce the conversations of FILE to memory.exchanges."""
    from streams.ingest import ingest_file

    s = _client_settings()
    try:
        stats = asyncio.run(ingest_file(s, file, fmt, namespace, wait, timeout_s))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    dups = f", {stats.duplicates} already accepted (not sent again)" if stats.duplicates else ""
    click.echo(
        f"produced {stats.exchanges - stats.duplicates} exchanges ({stats.turns} turns) in "
        f"{stats.namespaces} namespaces, {stats.sessions} sessions{dups}, {stats.seconds:.1f}s"
        + (" - indexed" if wait and not stats.replays else "")
    )
    if stats.replays:
        raise click.ClickException(
            f"{stats.replays} exchanges were fenced as replays: their sessions had already "
            "applied those seqs, so they were NOT indexed (give them higher seqs, or leave seq "
            "out of the file to continue each session)"
        )


@main.command()
@click.option("--namespace", required=True)
@click.argument("question")
@click.option("-k", "k", type=int, default=10, show_default=True)
@click.option("--session", "session_id", default=None)
@click.option("--json", "as_json", is_flag=True, help="print the whole reply as JSON")
@click.option("--timeout", "timeout_s", type=float, default=15.0, show_default=True)
def ask(
    namespace: str, question: str, k: int, session_id: str | None, as_json: bool, timeout_s: float
) -> None:
    """Retrieve evidence for QUESTION through the request/reply topics."""
    from streams.client import ClientError, MemoryClient, ReplyTimeout

    s = _client_settings()

    async def run() -> Any:
        async with MemoryClient(s) as client:
            return await client.search(
                namespace, question, k=k, session_id=session_id, timeout_s=timeout_s
            )

    try:
        reply = asyncio.run(run())
    except ReplyTimeout as exc:
        raise TimedOut(f"{exc} (is the query worker running?)") from exc
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(orjson.dumps(reply.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(format_evidence(reply))


@main.command()
@click.argument("namespace")
@click.option("--session", "session_id", default=None, help="forget only this session")
@click.option("--yes", is_flag=True, help="confirm: the data cannot be brought back")
@click.option("--json", "as_json", is_flag=True, help="print the receipt as JSON")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True)
def forget(
    namespace: str, session_id: str | None, yes: bool, as_json: bool, timeout_s: float
) -> None:
    """Forget NAMESPACE (or one --session of it) in every stage, then print the receipt."""
    from streams.client import MemoryClient, ReplyTimeout

    if not yes:
        raise click.UsageError(
            f"forgetting {namespace}{'/' + session_id if session_id else ''} removes it for "
            "good; pass --yes to confirm"
        )
    s = _client_settings()

    async def run() -> Any:
        async with MemoryClient(s) as client:
            return await client.forget(namespace, session_id, timeout_s)

    try:
        receipt = asyncio.run(run())
    except ReplyTimeout as exc:
        raise TimedOut(f"{exc} (are the segmenter, encoder and indexer running?)") from exc
    if as_json:
        click.echo(orjson.dumps(receipt.as_dict(), option=orjson.OPT_INDENT_2).decode())
        return
    what = f"{namespace}/{session_id}" if session_id else namespace
    click.echo(f"forgot {what} (forget id {receipt.forget_id}) in {receipt.elapsed_s:.2f}s")
    for name, n in sorted(receipt.rows_removed.items()):
        updated = receipt.rows_updated.get(name, 0)
        click.echo(f"  {name:<8} {n} rows removed" + (f", {updated} updated" if updated else ""))
    click.echo(f"  redis    {receipt.redis_keys_removed} keys removed")
    click.echo(f"  lancedb  {receipt.versions_pruned} versions pruned")
    click.echo(
        "  stages   "
        + ", ".join(f"{st} {r.elapsed_s:.2f}s" for st, r in sorted(receipt.stages.items()))
    )


@main.command()
@click.argument("namespace")
@click.option("--session", "session_id", default=None)
@click.option("--type", "memory_type", default=None, help="records of this memory type only")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), default=None, help="YYYY-MM-DD")
@click.option("--turns", "turns", is_flag=True, help="list raw turns instead of records")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--page-size", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def records(
    namespace: str,
    session_id: str | None,
    memory_type: str | None,
    since: datetime | None,
    turns: bool,
    page: int,
    page_size: int,
    as_json: bool,
) -> None:
    """What is remembered about NAMESPACE: its records (or --turns), a page at a time."""
    from streams.client import MemoryClient

    s = _client_settings()

    async def run() -> Any:
        client = MemoryClient(s)  # reads LanceDB only: no broker connection needed
        if turns:
            return await client.list_turns(namespace, session_id, page, page_size)
        day = since.date() if since else None
        return await client.list_records(namespace, session_id, memory_type, day, page, page_size)

    result = asyncio.run(run())
    if as_json:
        out = {"total": result.total, "page": result.page, "page_size": result.page_size,
               "pages": result.pages, "items": result.items}  # fmt: skip
        click.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2, default=str).decode())
        return
    for item in result.items:
        if turns:
            when = item["session_date"].strftime("%Y-%m-%d") if item["session_date"] else "?"
            click.echo(f"[{when}] {item['session_id']} #{item['seq']} {item['text']}")
        else:
            when = item["created_at"].strftime("%Y-%m-%d") if item["created_at"] else "?"
            click.echo(
                f"[{when}] {item['memory_type']:<11} {item['semantic_text']}  ({item['id']})"
            )
    kind = "turns" if turns else "records"
    click.echo(f"page {result.page}/{result.pages}, {result.total} {kind}")


def format_evidence(reply: Any) -> str:
    lines = [f"Q: {reply.query}"]
    for i, item in enumerate(reply.evidence, 1):
        when = item.resolved_date or (item.date.strftime("%Y-%m-%d") if item.date else "?")
        score = item.scores.get("final", item.scores.get("rrf", 0.0))
        lines.append(
            f"{i:>2}. {item.kind:<6} [{when}] {item.text}  ({', '.join(item.turn_ids)}; {score:.3f})"
        )
    if reply.answer:
        lines.append(f"   answer: {reply.answer}")
    timing = ", ".join(f"{k} {v:.1f}ms" for k, v in reply.timings_ms.items())
    lines.append(f"   timings: {timing}")
    return "\n".join(lines)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the data directory of a lychee up, for its workers' restarts "
    "[default: that of the running lychee up]",
)
def status(as_json: bool, data_dir: Path | None) -> None:
    """Workers (restarts, failed stages), consumer lag per stage, dead letters, row counts."""
    from streams.status import collect, launcher_dir

    s = _client_settings()
    report = asyncio.run(collect(s, data_dir or launcher_dir(s)))
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    sup = report["supervision"]
    if sup is not None:
        state = sup.get("state", "?") if sup["launcher_alive"] else "not running"
        click.echo(f"lychee up (pid {sup.get('pid')}, {sup.get('preset')}): {state}")
        for w in sup["stages"]:
            click.echo(
                f"  {w['stage']:<10} {w['state']:<8} restarts {w['restarts']:<3} "
                + (f"pid {w['pid']}" if w["pid"] else f"last exit {w['last_exit_code']}")
            )
        if sup["failed"]:
            click.echo(f"  failed stages: {', '.join(sup['failed'])} (see their logs)")
    click.echo(f"{'stage':<16} {'group':<18} {'topic':<18} {'end':>8} {'committed':>9} {'lag':>6}")
    for row in report["stages"]:
        click.echo(
            f"{row['stage']:<16} {row['group']:<18} {row['topic']:<18} {row['end']:>8} {row['committed']:>9} {row['lag']:>6}"
        )
    click.echo("dead letters: " + ", ".join(f"{k}={v}" for k, v in report["dead_letters"].items()))
    click.echo("rows: " + ", ".join(f"{k}={v}" for k, v in report["rows"].items()))
    for ns, usage in sorted(report["construction_tokens"].items()):
        click.echo(
            f"construction tokens [{ns}]: " + ", ".join(f"{k}={v}" for k, v in usage.items())
        )
    for ep in report["metrics_endpoints"]:
        click.echo(f"metrics [{ep['stage']}]: {ep['url']} (pid {ep['pid']})")


@main.group()
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

    _settings()
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
    from streams.bench.harness import BenchError

    _settings()
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
    "--answer",
    is_flag=True,
    help="generate answers and grade them by the LoCoMo judge protocol (needs an LLM)",
)
@click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")
@click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")
@click.option("--also", multiple=True, type=click.Choice(list(VARIANTS)),
              help="a per-request variant (retrieval ablation) asked over the same ingest, "
                   "reported as lychee:<name>; repeatable")  # fmt: skip
def bench_locomo(data: Path, conversations: str | None, variant: str, ks: str, budgets: str,
                 out: Path | None, plot: Path | None, answer: bool, judge_base_url: str | None,
                 judge_model: str | None, also: tuple[str, ...]) -> None:  # fmt: skip
    """Evidence recall by category, cost and latency on LoCoMo, with raw-turn baselines.

    Uses the configured Kafka/Redis/LanceDB, or starts the embedded stack when
    LYCHEE_KAFKA_BOOTSTRAP is not set.
    """
    from streams.bench.harness import BenchError
    from streams.bench.judging import judge_target
    from streams.bench.locomo import run_locomo
    from workers.evaluation.report import format_table

    s = _settings()
    try:
        if answer and not llm_configured(s):
            raise BenchError("--answer needs an LLM: set LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL")
        judge = judge_target(s, judge_base_url, judge_model) if answer else None
        report = run_locomo(
            s, data, conversations.split(",") if conversations else None, variant,
            tuple(int(x) for x in ks.split(",")), tuple(int(x) for x in budgets.split(",")),
            also=also, judge=judge,
        )  # fmt: skip
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_table(report))
    if out:
        out.write_bytes(orjson.dumps(report.to_json_dict(), option=orjson.OPT_INDENT_2))
        click.echo(f"report: {out}")
    if plot:
        from workers.evaluation.plot import plot_recall_vs_budget

        plot_recall_vs_budget(report, plot)
        click.echo(f"plot: {plot}")


@bench.command("llm")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--format", "fmt", type=click.Choice(["locomo", "jsonl"]), default=None,
              help="default: jsonl for a .jsonl file, else locomo")  # fmt: skip
@click.option("--conversation", default=None, help="sample id or namespace (default: the first)")
@click.option("--segments", "segments_n", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--questions", "questions_n", type=click.IntRange(min=0), default=10,
              show_default=True, help="the file's questions whose evidence was encoded")  # fmt: skip
@click.option("--ask", "asks", multiple=True, help="a question of your own (repeatable)")
@click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")
@click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--redact",
    is_flag=True,
    help="print no question, answer or gold text (data whose licence forbids copies)",
)
def bench_llm(data: Path, fmt: str | None, conversation: str | None, segments_n: int,
              questions_n: int, asks: tuple[str, ...], judge_base_url: str | None,
              judge_model: str | None, out: Path | None, redact: bool) -> None:  # fmt: skip
    """The LLM path against the configured endpoint: the encoder over a conversation's first
    segments, then the LLM planner and answerer over its questions (or --ask), judged by the
    LoCoMo protocol; seconds, tokens and tokens/s per segment, outcomes, answers."""
    from streams.bench.harness import BenchError
    from streams.bench.llm import bench_llm as run

    try:
        run(_settings(), data, fmt, conversation, segments_n, questions_n, asks,
            (judge_base_url, judge_model), out, click.echo, redact)  # fmt: skip
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

    report = run_longmemeval(_settings(), data, granularity)
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
    from streams.bench.harness import BenchError
    from streams.bench.latency import print_synthetic, run_latency, run_synthetic

    if data is None and records is None:
        raise click.UsageError("give --data (LoCoMo scale), --synthetic N (store scale), or both")
    try:
        if data is not None:
            run_latency(_settings(), data, conversation, k)
        if records is not None:
            with contextlib.ExitStack() as stack:
                path = store or Path(stack.enter_context(tempfile.TemporaryDirectory()))
                print_synthetic(run_synthetic(_settings(), records, namespaces, k, path))
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
    s = _settings()
    print_embedder_bench(
        run_embedder_bench(data, chosen, texts_n, singles, sizes, rounds, s.embedding_onnx_dir)
    )


@bench.command("query-load")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--conversation", default=None, help="sample id (default: the first)")
@click.option(
    "--concurrency", "levels", default="1,4,16", show_default=True,
    help="comma-separated numbers of requests in flight",
)  # fmt: skip
@click.option("-k", "k", type=int, default=10, show_default=True)
@click.option(
    "--questions", type=click.IntRange(min=1), default=60, show_default=True,
    help="at most this many distinct questions per level",
)  # fmt: skip
def bench_query_load(
    data: Path, conversation: str | None, levels: str, k: int, questions: int
) -> None:
    """Questions/s and client round-trip p50/p95 at each concurrency, on one LoCoMo-format
    conversation ingested through the pipeline (embedded stack unless Kafka is configured)."""
    from streams.bench.harness import BenchError
    from streams.bench.query_load import run_query_load

    try:
        concurrency = tuple(int(x) for x in levels.split(","))
    except ValueError as exc:
        raise click.BadParameter(f"{levels!r}: expected numbers like 1,4,16") from exc
    if any(n < 1 for n in concurrency):
        raise click.BadParameter(f"{levels!r}: every concurrency must be >= 1")
    try:
        run_query_load(_settings(), data, conversation, concurrency, k, questions)
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

    _settings()
    report = run_fuzz(n, seed)
    click.echo(format_report(report))
    if report.lost or report.mismatched or "NO" in report.stages_alive:
        raise click.ClickException("hostile input was lost or mishandled (see above)")


@bench.command("llm-outage")
@click.option("--outage-s", type=float, default=90.0, show_default=True, help="seconds of 503s")
@click.option(
    "--rate-limit-s", type=float, default=30.0, show_default=True,
    help="then seconds of 429s with Retry-After",
)  # fmt: skip
@click.option("--refused-s", type=float, default=0.0, show_default=True, help="then 401s")
@click.option("--segments", type=click.IntRange(min=1), default=6, show_default=True)
def bench_llm_outage(outage_s: float, rate_limit_s: float, refused_s: float, segments: int) -> None:
    """The encoder against an LLM endpoint that fails, then recovers: pauses, resumes, dead
    letters (must be 0), calls and token counters per segment (must be 1 each).

    The endpoint is the scripted fake of the test suite (tests/fakes/openai_server.py): run it
    from a source checkout.
    """
    checkout = Path(__file__).resolve().parents[1]  # an editable install's source tree
    if (checkout / "tests" / "fakes").is_dir() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))
    try:
        from tests.fakes.openai_server import FakeOpenAI, status, valid
    except ImportError as exc:
        raise click.ClickException(
            "the fake LLM endpoint lives in tests/fakes: install from a source checkout"
        ) from exc
    from streams.bench.llm_faults import VALID_REPLY, format_report, run_llm_faults

    _settings()
    phases = [(outage_s, status(503, {})), (rate_limit_s, status(429, {"Retry-After": "5"}))]
    if refused_s:
        phases.append((refused_s, status(401, {})))
    with FakeOpenAI(default_reply=valid(VALID_REPLY)) as server:
        report = run_llm_faults(server, [p for p in phases if p[0] > 0], segments)
    click.echo(format_report(report))


@bench.command("chaos")
@click.option("--kills", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("--processes", type=click.IntRange(min=1), default=2, show_default=True,
              help="workers per ingest stage (segmenter, encoder, indexer)")  # fmt: skip
@click.option("--interval", "interval_s", type=float, default=4.0, show_default=True,
              help="mean seconds between kills")  # fmt: skip
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a LoCoMo file; default: a synthetic conversation")  # fmt: skip
@click.option("--conversation", "conversation_id", default=None, help="sample id in --data")
@click.option("--sessions", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--per-session", type=click.IntRange(min=1), default=40, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--stack", "preset", type=click.Choice(["durable", "ephemeral"]), default="durable",
              show_default=True,
              help="durable: Redis and the broker are killed -9 once each as well")  # fmt: skip
@click.option("--undisturbed", type=click.IntRange(min=0), default=2, show_default=True,
              help="clean ingests first, for the record-set Jaccard and its noise floor")  # fmt: skip
def bench_chaos(kills: int, processes: int, interval_s: float, data: Path | None,
                conversation_id: str | None, sessions: int, per_session: int, seed: int,
                preset: str, undisturbed: int) -> None:  # fmt: skip
    """Ingest while random ingest workers (and on the durable stack Redis and the broker) are
    killed -9 and restarted: lost and duplicated turns, exchanges in no or two segments,
    encodes against segments, record-set Jaccard against undisturbed runs, dead letters."""
    import uuid

    from streams.bench.chaos import format_report, run_chaos, synthetic

    _settings()
    if data is not None:
        from workers.datasets import load_locomo

        convs = load_locomo(data)
        chosen = [c for c in convs if conversation_id in (None, c.namespace)]
        if not chosen:
            raise click.ClickException(f"no conversation {conversation_id!r} in {data}")
        exchanges = list(chosen[0].exchanges)
    else:
        exchanges = synthetic(f"chaos-{uuid.uuid4().hex[:6]}", sessions, per_session)
    report = run_chaos(exchanges, kills=kills, processes=processes, interval_s=interval_s,
                       seed=seed, durable=preset == "durable", undisturbed=undisturbed)  # fmt: skip
    click.echo("\n".join(report.kill_log))
    click.echo(format_report(report))


@bench.command("segmentation")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
def bench_segmentation(data: Path) -> None:
    """Segments and turns per segment on a LoCoMo file, for the configured segmenter."""
    from streams.bench.segmentation import segmentation

    segmentation(_settings(), data)


@bench.command("gateway")
@click.option("--adds", "n", type=int, default=2000, show_default=True, help="exchanges added")
@click.option("--sessions", type=int, default=20, show_default=True)
@click.option("--concurrency", type=int, default=64, show_default=True, help="callers at once")
@click.option("--searches", type=int, default=200, show_default=True)
def bench_gateway(n: int, sessions: int, concurrency: int, searches: int) -> None:
    """Gateway add latency (time to the 202) and search round trip p50/p95, over HTTP against
    an embedded stack."""
    from streams.bench.gateway import gateway_bench

    _settings()
    gateway_bench(n, sessions, concurrency, searches)


# -- gateway and MCP ---------------------------------------------------------------------------


@main.group(invoke_without_command=True)
@click.option("--host", default=None, help="address to listen on (default LYCHEE_GATEWAY_HOST)")
@click.option("--port", type=int, default=None, help="0 picks a free port (LYCHEE_GATEWAY_PORT)")
@click.pass_context
def gateway(ctx: click.Context, host: str | None, port: int | None) -> None:
    """The HTTP gateway (REST, MCP at /mcp, /metrics, OpenAPI at /docs)."""
    if ctx.invoked_subcommand is not None:
        return
    from streams.gateway.auth import KeyFileError, KeyRing
    from streams.gateway.server import GatewayConfigError, bind, check_binding, serve

    s = _settings()
    s = s.model_copy(
        update={
            "gateway_host": host or s.gateway_host,
            "gateway_port": s.gateway_port if port is None else port,
        }
    )
    try:
        keys = KeyRing.load(s.api_keys_file)
        warning = check_binding(s.gateway_host, keys)
        sock = bind(s.gateway_host, s.gateway_port)
    except (KeyFileError, GatewayConfigError) as exc:
        raise click.ClickException(str(exc)) from exc
    if warning:
        click.echo(f"warning: {warning}", err=True)
    h, p = sock.getsockname()[:2]
    click.echo(
        f"lychee gateway on http://{h}:{p} (OpenAPI at /docs, MCP at /mcp, metrics at /metrics)"
        + (f"; {len(keys.keys)} API keys" if keys else ""),
        err=True,
    )
    serve(s, sock, keys)


@gateway.group("keys")
def gateway_keys() -> None:
    """API keys of LYCHEE_API_KEYS_FILE (stored as SHA-256 digests)."""


def _keys_file(path: Path | None) -> Path:
    found = path or _settings().api_keys_file
    if found is None:
        raise click.ClickException("set LYCHEE_API_KEYS_FILE or pass --file")
    return found


_FILE = click.option("--file", "path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="the keys file (default LYCHEE_API_KEYS_FILE)")  # fmt: skip


@gateway_keys.command("add")
@click.argument("name")
@click.option("--namespace", "-n", "namespaces", multiple=True, required=True,
              help="a namespace, a prefix ending in *, or * (repeatable)")  # fmt: skip
@_FILE
def keys_add(name: str, namespaces: tuple[str, ...], path: Path | None) -> None:
    """Create a key for NAME; prints it once (only its digest is stored)."""
    from streams.gateway.auth import KeyFileError, add_key

    file = _keys_file(path)
    try:
        key = add_key(file, name, list(namespaces))
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(key)
    click.echo(
        f"stored the digest of {name}'s key in {file}; restart the gateway to use it", err=True
    )


@gateway_keys.command("list")
@_FILE
def keys_list(path: Path | None) -> None:
    """Names and namespaces of the keys (never the keys)."""
    from streams.gateway.auth import KeyFileError, list_keys

    try:
        for entry in list_keys(_keys_file(path)):
            click.echo(f"{entry['name']}: {', '.join(entry['namespaces'] or [])}")
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc


@gateway_keys.command("revoke")
@click.argument("name")
@_FILE
def keys_revoke(name: str, path: Path | None) -> None:
    """Remove NAME's key (takes effect when the gateway restarts)."""
    from streams.gateway.auth import KeyFileError, revoke_key

    try:
        revoke_key(_keys_file(path), name)
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"revoked {name}", err=True)


@main.command()
@click.option("--namespace", default=None, help="the namespace tools use when a call names none")
def mcp(namespace: str | None) -> None:
    """The MCP server on stdio, for an MCP host (talks to Kafka and Redis directly)."""
    from streams.gateway.mcp import run_stdio

    run_stdio(_settings(), namespace)


if __name__ == "__main__":
    sys.exit(main())
