"""The data commands: ingest, ask, forget, records and status."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from schemas.query import K_MAX, TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN
from schemas.records import MemoryType
from streams.cli.common import SECONDS, TimedOut, client_settings, named, printable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from streams.dlq import DeadLetter
    from workers.datasets import Skipped


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["locomo", "jsonl"]), required=True)
@click.option(
    "--namespace",
    default=None,
    callback=named,
    help="override the namespace (one sample/namespace only)",
)
@click.option("--wait/--no-wait", default=False, help="return when everything produced is indexed")
@click.option("--timeout", "timeout_s", type=SECONDS, default=900.0, show_default=True)
def ingest(file: Path, fmt: str, namespace: str | None, wait: bool, timeout_s: float) -> None:
    """Produce the conversations of FILE to memory.exchanges.

    A message the contract refuses (a turn over its length limit, say) is named on stderr and
    left out; the rest of the file is produced, and the exit status is 1, so that a script
    sees what was not taken (an empty file says so and is 0). A file not in its format (a
    line that is not JSON, a sample without its conversation) is refused whole: nothing is
    produced."""
    from streams import tracing
    from streams.ingest import ingest_file
    from workers.datasets import skipped_lines

    s = client_settings()
    tracing.setup("ingest")  # each exchange produced starts a trace (OTEL_* environment)
    try:
        stats = asyncio.run(ingest_file(s, file, fmt, namespace, wait, timeout_s))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    except TimeoutError as exc:
        raise TimedOut(f"timed out: {exc}{failed_stages(s)}") from exc
    for line in skipped_lines(stats.skipped, rest=bool(stats.exchanges)):
        click.echo(line, err=True)
    if stats.skipped and not stats.exchanges:
        raise click.ClickException(f"nothing ingested: every message of {file} was refused")
    if not stats.exchanges:
        click.echo(f"{file} holds no exchanges", err=True)
        return
    if stats.exchanges and stats.duplicates == stats.exchanges:
        click.echo(
            f"nothing new: all {counted(stats.exchanges, 'exchange')} of {file} were accepted "
            "before (not sent again)"
        )
        _refused(file, stats.skipped)
        return
    dups = f", {stats.duplicates} already accepted (not sent again)" if stats.duplicates else ""
    refused = f", {len(stats.skipped)} skipped (refused)" if stats.skipped else ""
    click.echo(
        f"produced {counted(stats.exchanges - stats.duplicates, 'exchange')} "
        f"({counted(stats.turns, 'turn')}) in {counted(stats.namespaces, 'namespace')}, "
        f"{counted(stats.sessions, 'session')}{dups}{refused}, "
        f"{stats.seconds:.1f}s"
        + (" - indexed" if wait and not stats.replays and not stats.dead_letters else "")
    )
    if stats.undated:
        click.echo(
            f"note: {counted(stats.undated, 'exchange')} of {file} had no date (no "
            "session_date, no turn created_at): a day said relative to it ('yesterday', "
            "'next Friday') stays as said, and a change said across undated sessions is not "
            "ordered",
            err=True,
        )
    for letter in stats.dead_letters:
        click.echo(printable(_dead_letter_line(letter)), err=True)
    if stats.replays:
        raise click.ClickException(
            f"{counted(stats.replays, 'exchange')} fenced as replays: their sessions had already "
            "applied those seqs, so they were NOT indexed (give them higher seqs, or leave seq "
            "out of the file to continue each session)"
        )
    if stats.dead_letters:
        raise click.ClickException(
            f"{counted(len(stats.dead_letters), 'message')} of {file}'s sessions dead-lettered "
            "by a stage while it was ingested: what they carried is NOT indexed (`lychee dlq "
            "show TOPIC ID` shows one, `lychee dlq replay TOPIC` sends them again once mended)"
        )
    _refused(file, stats.skipped)


def _refused(file: Path, skipped: Sequence[Skipped]) -> None:
    """Exit 1 when messages of the file were refused: the rest was taken, not everything."""
    if skipped:
        raise click.ClickException(
            f"{counted(len(skipped), 'message')} of {file} refused (named above) and NOT "
            "produced; the rest of the file was produced"
        )


def _dead_letter_line(letter: DeadLetter) -> str:
    """A dead letter of an ingest in one line: where it is, who refused it and why."""
    owner = "/".join(x for x in letter.owner() or () if x)
    error = letter.headers.get("error", "")[:300]
    return (
        f"dead-lettered: {letter.topic} {letter.id} ({owner}) by the "
        f"{letter.headers.get('stage', '?')}: {letter.error_type}: {error}"
    )


def failed_stages(s: Any) -> str:
    """What the running `lychee up` says of stages it gave up restarting, for a wait that
    timed out: the lag alone does not say that nobody is left to catch up."""
    from streams.status import launcher_dir, supervision

    report = supervision(launcher_dir(s))
    if not report or not report.get("launcher_alive") or not report.get("failed"):
        return ""
    failed = report["failed"]
    return (
        f"; lychee up gave up restarting {', '.join(failed)} (see its log under "
        f"{report['data_dir']}/logs; `lychee worker STAGE` runs one by hand)"
    )


def counted(n: int, noun: str) -> str:
    """`n` and the noun, plural unless it is one."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


@click.command()
@click.option("--namespace", required=True, callback=named)
@click.argument("question")
@click.option("-k", "k", type=click.IntRange(1, K_MAX), default=10, show_default=True)
@click.option("--session", "session_id", default=None, callback=named)
@click.option("--json", "as_json", is_flag=True, help="print the whole reply as JSON")
@click.option("--timeout", "timeout_s", type=SECONDS, default=15.0, show_default=True)
@click.option("--answer", is_flag=True, help="an answer from the evidence too (needs an LLM)")
@click.option(
    "--token-budget",
    type=click.IntRange(TOKEN_BUDGET_MIN, TOKEN_BUDGET_MAX),
    default=None,
    help="the most prompt tokens the evidence may take: its best items that fit, in order",
)
def ask(
    namespace: str,
    question: str,
    k: int,
    session_id: str | None,
    as_json: bool,
    timeout_s: float,
    answer: bool,
    token_budget: int | None,
) -> None:
    """Retrieve evidence for QUESTION through the request/reply topics (and, with --answer,
    an answer written from it by the configured LLM)."""
    from streams import tracing
    from streams.client import MemoryClient
    from streams.errors import ReplyTimeout

    s = client_settings()
    tracing.setup("ask")  # the search's trace starts here (OTEL_* environment)

    async def run() -> Any:
        async with MemoryClient(s) as client:
            return await client.search(
                namespace,
                question,
                k=k,
                session_id=session_id,
                timeout_s=timeout_s,
                answer=answer,
                token_budget=token_budget,
            )

    try:
        reply = asyncio.run(run())
    except ReplyTimeout as exc:
        hint = "is the query worker running? `lychee status` says"
        if s.llm.configured:
            hint += (
                f"; with an LLM ({s.llm.base_url}), is it answering? A slow one needs a longer "
                "--timeout"
            )
        raise TimedOut(f"{exc} ({hint})") from exc
    if as_json:
        click.echo(orjson.dumps(reply.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(format_evidence(reply, token_budget))


def format_marks(item: Any) -> str:
    """What the item's links say, as the context says it in words, in one short line: what
    replaced it and when, or since when it is current and what it replaced, and what
    contradicts it. Record ids are shortened to 8 characters (`--json` has them whole)."""

    def ids(found: list[str]) -> str:
        return ", ".join(x[:8] for x in found)

    marks = []
    if item.superseded_by:
        what = f"{', '.join(item.replaced_values)} " if item.replaced_values else ""
        rest = "its other values" if item.kind == "record" else "the rest"
        held = f" ({rest} not said to change)" if item.replaced_values else ""
        marks.append(
            f"{what}replaced {item.valid_to or 'later'} by {ids(item.superseded_by)}{held}"
        )
        if item.supersedes:
            marks.append(f"had replaced {ids(item.supersedes)}")
    elif item.supersedes:
        since = f" since {item.valid_from}" if item.valid_from else ""
        marks.append(f"current{since}, replaced {ids(item.supersedes)}")
    if item.conflict:
        marks.append(f"conflicts with {ids(item.conflict)}")
    return "; ".join(marks)


@click.command()
@click.argument("namespace")
@click.option("--session", "session_id", default=None, help="forget only this session")
@click.option("--yes", is_flag=True, help="confirm: the data cannot be brought back")
@click.option("--json", "as_json", is_flag=True, help="print the receipt as JSON")
@click.option("--timeout", "timeout_s", type=SECONDS, default=300.0, show_default=True)
def forget(
    namespace: str, session_id: str | None, yes: bool, as_json: bool, timeout_s: float
) -> None:
    """Forget NAMESPACE (or one --session of it) in every stage, then print the receipt."""
    from streams.client import MemoryClient
    from streams.errors import ReplyTimeout

    if not yes:
        raise click.UsageError(
            f"forgetting {namespace}{'/' + session_id if session_id else ''} removes it for "
            "good; pass --yes to confirm"
        )
    s = client_settings()

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
    if not any(receipt.rows_removed.values()) and not receipt.redis_keys_removed:
        click.echo(f"nothing was stored for {what}")


@click.command()
@click.argument("namespace", callback=named)
@click.option("--session", "session_id", default=None, callback=named)
@click.option(
    "--type",
    "memory_type",
    type=click.Choice([t.value for t in MemoryType]),
    default=None,
    help="records of this memory type only",
)
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), default=None, help="YYYY-MM-DD")
@click.option("--turns", "turns", is_flag=True, help="list raw turns instead of records")
@click.option(
    "--history",
    "show_history",
    is_flag=True,
    help="what replaced what (when, from which turns) and the conflicts nothing settled",
)
@click.option("--record", "record_id", default=None, help="with --history: this record's only")
@click.option("--page", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--page-size", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def records(
    namespace: str,
    session_id: str | None,
    memory_type: str | None,
    since: datetime | None,
    turns: bool,
    show_history: bool,
    record_id: str | None,
    page: int,
    page_size: int,
    as_json: bool,
) -> None:
    """What is remembered about NAMESPACE: its records (or --turns), a page at a time, or
    its --history."""
    from streams.client import MemoryClient

    if record_id is not None and not show_history:
        raise click.UsageError("--record names the record whose --history to show")
    if turns and (memory_type or since):
        raise click.UsageError("--type and --since choose records, not --turns")
    s = client_settings()
    if show_history:
        print_history(asyncio.run(MemoryClient(s).history(namespace, record_id)), as_json)
        return

    async def run() -> Any:
        client = MemoryClient(s)  # reads LanceDB only: no broker connection needed
        if turns:
            return await client.list_turns(namespace, session_id, page, page_size)
        day = since.date() if since else None
        return await client.list_records(namespace, session_id, memory_type, day, page, page_size)

    where = f"namespace {namespace}" + (f", session {session_id}" if session_id else "")
    where += " with these filters" if memory_type or since else ""
    print_page(asyncio.run(run()), turns, where, as_json)


def print_page(result: Any, turns: bool, where: str, as_json: bool) -> None:
    """A page of records or turns, one line each, then where it is among the pages."""
    if as_json:
        out = {
            "total": result.total,
            "page": result.page,
            "page_size": result.page_size,
            "pages": result.pages,
            "items": result.items,
        }
        click.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2, default=str).decode())
        return
    for item in result.items:
        if turns:
            said = item["session_date"] or item.get("created_at")  # a turn dated on its own
            when = said.strftime("%Y-%m-%d") if said else "?"
            text = printable(item["text"])
            click.echo(f"[{when}] {item['session_id']} #{item['seq']} {text}")
        else:
            when = item["created_at"].strftime("%Y-%m-%d") if item["created_at"] else "?"
            click.echo(
                f"[{when}] {item['memory_type']:<11} {printable(item['semantic_text'])}  ({item['id']})"
            )
    kind = "turn" if turns else "record"
    if not result.total:
        click.echo(f"no {kind}s in {where}", err=True)
    elif not result.items:
        click.echo(
            f"page {result.page} is past the last ({result.pages}): {counted(result.total, kind)}",
            err=True,
        )
    else:
        click.echo(f"page {result.page}/{result.pages}, {counted(result.total, kind)}")


def print_history(found: Any, as_json: bool) -> None:
    """Each supersession as "older -> newer", then each conflict, with dates and turns."""
    if as_json:
        out = {"supersessions": found.supersessions, "conflicts": found.conflicts}
        click.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2, default=str).decode())
        return

    def said(x: Any) -> str:
        when = x.said_at.strftime("%Y-%m-%d") if x.said_at else "?"
        return f"[{when}] {printable(x.text)}  ({x.record_id}; {', '.join(x.turn_ids)})"

    for c in found.supersessions:
        when = c.changed_at.strftime("%Y-%m-%d") if c.changed_at else "?"
        click.echo(f"replaced on {when} ({c.found_by}: {c.reason})")
        click.echo(f"  was  {said(c.older)}")
        click.echo(f"  now  {said(c.newer)}")
    for c in found.conflicts:
        click.echo(f"conflict ({c.found_by}: {c.reason})")
        click.echo(f"  one  {said(c.older)}")
        click.echo(f"  other {said(c.newer)}")
    click.echo(f"{len(found.supersessions)} supersessions, {len(found.conflicts)} open conflicts")


def format_evidence(reply: Any, token_budget: int | None = None) -> str:
    """The evidence in the reply's order (selection's: relevance, diversity, what the first
    items show), each with its fusion score, which that order does not follow; with the
    request's `token_budget`, an empty reply says that the budget may be why."""
    lines = [f"Q: {reply.query}"]
    for i, item in enumerate(reply.evidence, 1):
        when = item.resolved_date or (item.date.strftime("%Y-%m-%d") if item.date else "?")
        score = item.scores.get("final", item.scores.get("rrf", 0.0))
        lines.append(
            f"{i:>2}. {item.kind:<6} [{when}] {item.text}  "
            f"({', '.join(item.turn_ids)}; fused {score:.3f})"
        )
        marks = format_marks(item)
        if marks:
            lines.append(f"    [{marks}]")
    if not reply.evidence and token_budget is not None:
        lines.append(
            f"   no evidence within {token_budget} tokens: every item found takes more, or "
            f"nothing in namespace {reply.namespace} matches (ask without --token-budget)"
        )
    elif not reply.evidence:
        lines.append(f"   no evidence: nothing in namespace {reply.namespace} matches")
    if reply.answer:
        lines.append(f"   answer: {reply.answer}")
    if reply.answer_error:
        lines.append(f"   no answer: {reply.answer_error}")
    if reply.answer_items is not None and reply.answer_items < len(reply.evidence):
        lines.append(
            f"   the answer read the first {reply.answer_items} of {len(reply.evidence)} items: "
            "the rest did not fit the model's context window"
        )
    timing = ", ".join(f"{k} {v:.1f}ms" for k, v in reply.timings_ms.items())
    lines.append(f"   timings: {timing}")
    return printable("\n".join(lines))


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--data-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="the data directory of a lychee up, for its workers' restarts "
    "[default: that of the running lychee up]",
)
def status(as_json: bool, data_dir: Path | None) -> None:
    """Workers (restarts, failed stages), consumer lag per stage, dead letters, row counts."""
    from streams.stack.supervisor import SUPERVISION_FILE
    from streams.status import collect, launcher_dir

    if data_dir is not None and not (data_dir / SUPERVISION_FILE).is_file():
        raise click.ClickException(
            f"{data_dir} is no lychee up data directory (it has no {SUPERVISION_FILE})"
        )
    s = client_settings()
    report = asyncio.run(collect(s, data_dir or launcher_dir(s)))
    if as_json:
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    sup = report["supervision"]
    if sup is not None:
        state = sup.get("state", "?") if sup["launcher_alive"] else "not running"
        if sup["launcher_alive"] and sup.get("ready") is False:
            state += ", workers loading their models (questions wait for `workers ready`)"
        click.echo(f"lychee up (pid {sup.get('pid')}, {sup.get('preset')}): {state}")
        for w in sup["stages"]:
            click.echo(
                f"  {w['stage']:<10} {w['state']:<8} restarts {w['restarts']:<3} "
                + (f"pid {w['pid']}" if w["pid"] else f"last exit {w['last_exit_code']}")
            )
        if sup["failed"]:
            click.echo(f"  failed stages: {', '.join(sup['failed'])} (see their logs)")
    else:
        click.echo(
            f"workers: no lychee up of this broker ({s.kafka.bootstrap}) is known here; "
            "--data-dir DIR shows that of the lychee up on DIR"
        )
    click.echo(f"{'stage':<16} {'group':<18} {'topic':<18} {'end':>8} {'committed':>9} {'lag':>6}")
    for row in report["stages"]:
        click.echo(
            f"{row['stage']:<16} {row['group']:<18} {row['topic']:<18} {row['end']:>8} {row['committed']:>9} {row['lag']:>6}"
        )
    for p in report["pauses"]:
        click.echo(
            f"PAUSED {p['stage']} (pid {p['pid']}) for {p['paused_s']:.0f}s: {p['kind']} "
            f"failure, {p['error_type']} (see the worker's log: stage.paused)"
        )
    click.echo("dead letters: " + ", ".join(f"{k}={v}" for k, v in report["dead_letters"].items()))
    click.echo("rows: " + ", ".join(f"{k}={v}" for k, v in report["rows"].items()))
    for ns, usage in sorted(report["construction_tokens"].items()):
        click.echo(
            f"construction tokens [{ns}]: " + ", ".join(f"{k}={v}" for k, v in usage.items())
        )
    for ep in report["metrics_endpoints"]:
        click.echo(f"metrics [{ep['stage']}]: {ep['url']} (pid {ep['pid']})")
