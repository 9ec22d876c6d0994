"""`lychee bench` commands for what survives: lychee up killed half way, workers and servers
killed -9 while ingesting, hostile input, and an LLM endpoint that fails then recovers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streams.cli.bench.options import data_file
from streams.cli.common import settings

if TYPE_CHECKING:
    from schemas import Exchange


@click.command("durability")
@data_file
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


@click.command("chaos")
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
    from streams.bench.chaos import format_report, run_chaos

    settings()
    exchanges = _chaos_exchanges(data, conversation_id, sessions, per_session)
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


def _chaos_exchanges(
    data: Path | None, conversation_id: str | None, sessions: int, per_session: int
) -> list[Exchange]:
    """What `bench chaos` ingests: a conversation of --data (the first, or the one named), or
    a synthetic one of `sessions` x `per_session` exchanges under a fresh namespace."""
    if data is None:
        import uuid

        from streams.bench.chaos import synthetic

        return synthetic(f"chaos-{uuid.uuid4().hex[:6]}", sessions, per_session)
    from streams.bench.harness import load_reported

    convs, _ = load_reported(data)
    chosen = [c for c in convs if conversation_id in (None, c.namespace)]
    if not chosen:
        raise click.ClickException(f"no conversation {conversation_id!r} in {data}")
    return list(chosen[0].exchanges)


@click.command("fuzz")
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


@click.command("llm-outage")
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
    checkout = Path(__file__).resolve().parents[3]  # an editable install's source tree
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
