"""`lychee`: the embedded stack, one stage, ingest, ask, status and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import click
import orjson

from streams.apps import STAGES
from streams.bench.harness import VARIANTS
from streams.logs import configure
from streams.settings import Settings


def _settings() -> Settings:
    s = Settings()
    configure(s.log_level, s.log_format)
    return s


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Streaming long-term memory for LLM agents."""


@main.command()
@click.option(
    "--data-dir", type=click.Path(path_type=Path), default=Path(".lychee"), show_default=True
)
@click.option("--kafka-port", type=int, default=9092, show_default=True, help="0 picks a free port")
@click.option("--redis-port", type=int, default=6379, show_default=True, help="0 picks a free port")
@click.option("--gateway-port", type=int, default=8080, show_default=True,
              help="the HTTP gateway on loopback; 0 picks a free port, -1 starts none")  # fmt: skip
def up(data_dir: Path, kafka_port: int, redis_port: int, gateway_port: int) -> None:
    """Start broker, Redis, every worker and the gateway on loopback; Ctrl-C stops them all."""
    from streams.stack.embedded import Stack

    _settings()
    stack = Stack(data_dir.resolve(), kafka_port, redis_port)
    stack.gateway_port = None if gateway_port < 0 else gateway_port
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        stack.launch()
        click.echo(
            f"lychee is up: kafka {stack.bootstrap}, redis {stack.redis_url}, lancedb {stack.lancedb_uri}"
        )
        if stack.gateway_port is not None:
            click.echo(f"gateway: {stack.gateway_url} (OpenAPI at /docs, MCP at /mcp)")
        click.echo("for clients in another shell:")
        for k, v in stack.env().items():
            click.echo(f"  export {k}={v}")
        click.echo(f"logs in {data_dir / 'logs'}; Ctrl-C to stop")
        while not stop["now"]:
            for child in stack.children:
                if not child.alive:
                    raise click.ClickException(
                        f"{child.name} exited ({child.proc.returncode if child.proc else '?'}); see {child.log_path}"
                    )
            time.sleep(0.5)
    finally:
        click.echo("stopping...")
        stack.stop()
        click.echo("stopped")


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
    from streams.topics import ensure_topics

    s = _settings()
    created = asyncio.run(ensure_topics(s.kafka_bootstrap, s.topic_partitions, s.topic_replication))
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

    s = _settings()
    try:
        stats = asyncio.run(ingest_file(s, file, fmt, namespace, wait, timeout_s))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"produced {stats.exchanges} exchanges ({stats.turns} turns) in {stats.namespaces} namespaces, "
        f"{stats.sessions} sessions, {stats.seconds:.1f}s" + (" - indexed" if wait else "")
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
    from streams.client import ClientError, MemoryClient

    s = _settings()

    async def run() -> Any:
        async with MemoryClient(s) as client:
            return await client.search(
                namespace, question, k=k, session_id=session_id, timeout_s=timeout_s
            )

    try:
        reply = asyncio.run(run())
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(orjson.dumps(reply.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(format_evidence(reply))


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
def status(as_json: bool) -> None:
    """Consumer lag per stage, dead letters, and row counts."""
    from streams.status import collect

    s = _settings()
    report = asyncio.run(collect(s))
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(f"{'stage':<10} {'group':<18} {'topic':<18} {'end':>8} {'committed':>9} {'lag':>6}")
    for row in report["stages"]:
        click.echo(
            f"{row['stage']:<10} {row['group']:<18} {row['topic']:<18} {row['end']:>8} {row['committed']:>9} {row['lag']:>6}"
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
def bench_throughput(n: int, sessions: int, probes: int) -> None:
    """Exchanges/s end to end vs raw embedding rate; produce-to-searchable p50/p95."""
    from streams.bench.throughput import throughput

    _settings()
    throughput(n, sessions, probes)


@bench.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--conversations", default=None, help="comma-separated sample ids (default: all)")
@click.option("--variant", default="full", show_default=True, type=click.Choice(list(VARIANTS)))
@click.option("--k", "ks", default="5,10,15", show_default=True)
@click.option("--budgets", default="500,1000,2000", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--answer", is_flag=True, help="generate and judge answers (needs an LLM)")
def bench_locomo(data: Path, conversations: str | None, variant: str, ks: str, budgets: str,
                 out: Path | None, plot: Path | None, answer: bool) -> None:  # fmt: skip
    """Evidence recall by category, cost and latency on LoCoMo, with raw-turn baselines.

    Uses the configured Kafka/Redis/LanceDB, or starts the embedded stack when
    LYCHEE_KAFKA_BOOTSTRAP is not set.
    """
    from streams.bench.harness import BenchError
    from streams.bench.locomo import run_locomo
    from workers.evaluation.report import format_table

    s = _settings()
    if answer:
        raise click.ClickException(
            "answer generation and judging are not built yet (they come with the planner/answer "
            "stage); run without --answer for the retrieval metrics"
        )
    try:
        report = run_locomo(
            s, data, conversations.split(",") if conversations else None, variant,
            tuple(int(x) for x in ks.split(",")), tuple(int(x) for x in budgets.split(",")),
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
