"""`lychee bench` commands for what the memory finds and answers: LoCoMo and LongMemEval
evidence recall, the LLM path judged, and the segmenter's segments."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click
import orjson

from streams.bench.harness import VARIANTS
from streams.cli.bench.options import Counts, data_file, data_format, judge_options
from streams.cli.common import settings

if TYPE_CHECKING:
    from workers.evaluation.report import LocomoReport, LongMemEvalReport


@click.command("locomo")
@data_file
@click.option("--conversations", default=None, help="comma-separated sample ids (default: all)")
@click.option("--variant", default="full", show_default=True, type=click.Choice(list(VARIANTS)))
@click.option("--k", "ks", type=Counts(1, 200), default="5,10,15", show_default=True)
@click.option("--budgets", type=Counts(), default="500,1000,2000", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option(
    "--dump",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="every reply's evidence as JSON, for python -m tests.evals.compare",
)
@click.option(
    "--answer",
    is_flag=True,
    help="generate answers and grade them by the LoCoMo judge protocol (needs an LLM)",
)
@judge_options
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
    ks: tuple[int, ...],
    budgets: tuple[int, ...],
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
        if answer and not s.llm.configured:
            raise BenchError("--answer needs an LLM: set LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL")
        judge = judge_target(s, judge_base_url, judge_model) if answer else None
        report = run_locomo(
            s,
            data,
            conversations.split(",") if conversations else None,
            variant,
            ks,
            budgets,
            also=also,
            judge=judge,
            dump=dump,
        )
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_table(report))
    _locomo_files(report, out, dump, plot)


def _locomo_files(
    report: LocomoReport, out: Path | None, dump: Path | None, plot: Path | None
) -> None:
    """Name each file `bench locomo` was asked for, writing the report and its plot."""
    if out:
        _write_report(report, out)
    if dump:
        click.echo(f"replies: {dump}")
    if plot:
        from workers.evaluation.plot import plot_recall_vs_budget

        plot_recall_vs_budget(report, plot)
        click.echo(f"plot: {plot}")


def _write_report(report: LocomoReport | LongMemEvalReport, out: Path) -> None:
    out.write_bytes(orjson.dumps(report.to_json_dict(), option=orjson.OPT_INDENT_2))
    click.echo(f"report: {out}")


@click.command("longmemeval")
@data_file
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
        _write_report(report, out)


@click.command("llm")
@data_file
@data_format
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
@judge_options
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


@click.command("judge")
@judge_options
def bench_judge(judge_base_url: str | None, judge_model: str | None) -> None:
    """Grade the shipped sanity pairs with the judge (default: the configured LLM): right
    answers in other words, wrong ones on the same subject, empty and error answers, an
    answer that copies the question. Exits 1 when the judge misses any: `bench llm` and
    `bench locomo --answer` would then report no accuracy."""
    import asyncio

    from streams.bench.errors import BenchError
    from streams.bench.judging import judge_target, make_judge
    from workers.evaluation.judge_check import check_judge

    s = settings()
    try:
        target = judge_target(s, judge_base_url, judge_model)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    check = asyncio.run(check_judge(make_judge(s, target)))
    for miss in check.missed:
        want = "CORRECT" if miss.expected else "WRONG"
        click.echo(f"missed: {miss.name}: wants {want}; {miss.why}")
    click.echo(check.line())
    if not check.passed:
        raise SystemExit(1)


@click.command("segmentation")
@data_file
@data_format
def bench_segmentation(data: Path, fmt: str | None) -> None:
    """Segments and turns per segment on a conversation file, for the configured segmenter."""
    from streams.bench.segmentation import segmentation

    segmentation(settings(), data, fmt)
