"""`lychee dlq`: list dead letters by reason, show one, replay them to their source topic."""

from __future__ import annotations

import asyncio
from typing import Any

import click
import orjson

from streams.cli.common import client_settings, printable


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


@click.group()
def dlq() -> None:
    """Dead letters: what a stage could not process, with the reason, kept for replay."""


@dlq.command("list")
@click.argument("topic", required=False)
@click.option("--error-type", default=None, help="only dead letters of this reason")
@click.option("--json", "as_json", is_flag=True)
def dlq_list(topic: str | None, error_type: str | None, as_json: bool) -> None:
    """Counts by topic and reason, oldest and newest, one sample each (TOPIC: a source topic
    such as memory.segments, or its .dlq; default: every one); none of a namespace or
    session forgotten since."""
    from streams import dlq as dead

    s = client_settings()
    letters = asyncio.run(dead.read(s, [topic] if topic else None, error_type))
    rows = dead.summarize(asyncio.run(dead.remembered(s, letters)))
    if as_json:
        click.echo(_dump(rows))
        return
    if not rows:
        click.echo("no dead letters" + (f" of type {error_type}" if error_type else ""))
    for row in rows:
        sample = row["sample"]
        click.echo(
            f"{row['topic']}  {row['error_type']}: {row['count']} "
            f"(oldest {row['oldest']}, newest {row['newest']})"
        )
        click.echo(f"    e.g. {sample['id']}: {printable(sample['error'][:200])}")
        if again := row["after_replay"]:
            click.echo(
                f"    {again} of them failed again after a replay: the same bytes fail the same "
                "way until the stage is mended"
            )


SHOWN_CHARS = 4000  # of a value, unless --full: a dead letter can be megabytes


@dlq.command("show")
@click.argument("topic")
@click.argument("offset")
@click.option(
    "--full", is_flag=True, help=f"the whole value, not its first {SHOWN_CHARS} characters"
)
def dlq_show(topic: str, offset: str, full: bool) -> None:
    """One dead letter (OFFSET, or PARTITION:OFFSET as `list` prints it): its headers and the
    original bytes, decoded where they decode (value_bytes says how many there are)."""
    from streams import dlq as dead

    letter = asyncio.run(dead.show(client_settings(), topic, offset))
    click.echo(_dump(letter.as_dict(full=True, limit=None if full else SHOWN_CHARS)))


@dlq.command("replay")
@click.argument("topic")
@click.option("--error-type", default=None, help="only dead letters of this reason")
@click.option("--since", default=None, help="failed at or after: an ISO date/time or an age (2h)")
@click.option("--dry-run", is_flag=True, help="say what would be replayed, produce nothing")
@click.option("--force", is_flag=True, help="replay dead letters that were replayed before")
@click.option("--json", "as_json", is_flag=True)
def dlq_replay(
    topic: str,
    error_type: str | None,
    since: str | None,
    dry_run: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Produce each dead letter of TOPIC (original key, value and headers) back to its source
    topic, once: a second replay of the same dead letters is refused unless --force."""
    from streams import dlq as dead

    when = dead.parse_since(since) if since else None
    report = asyncio.run(
        dead.replay(client_settings(), topic, error_type, when, dry_run=dry_run, force=force)
    )
    if as_json:
        click.echo(_dump(report.__dict__))
    elif not report.selected:
        click.echo(f"nothing to replay: {_none_selected(topic, error_type, since)}")
        return
    else:
        verb = "would replay" if dry_run else "replayed"
        click.echo(
            f"{verb} {len(report.replayed)} of {report.selected} dead letters"
            + ("" if dry_run else f" (replay {report.replay_id})")
        )
        for row in report.replayed:
            to = f" -> {row['replayed']['to']}" if "replayed" in row else ""
            again = " (it failed again after a replay before)" if row["after_replay"] else ""
            click.echo(f"  {row['id']} {row['error_type']}: {row['source']}{to}{again}")
        for row in report.not_copied:
            click.echo(
                f"  {row['id']} not replayed: its value was too large to copy; it "
                f"stays in {row['source']}"
            )
        for row in report.forgotten:
            click.echo(f"  {row['id']} not replayed: its namespace or session was forgotten")
        for row in report.misdirected:
            click.echo(
                f"  {row['id']} not replayed: it names {row['named']!r}, which its dead-letter "
                "topic does not serve"
            )
        for row in report.twins:
            click.echo(
                f"  {row['id']} sent as {row['as']}: the same message, another stage's letter"
            )
    if (refusal := report.refusal()) and not dry_run:
        raise click.ClickException(f"{refusal}; --force replays them again")
    if report.already:
        click.echo(
            f"skipped {len(report.already)} replayed before (--force to replay them)", err=True
        )


def _none_selected(topic: str, error_type: str | None, since: str | None) -> str:
    """Why a replay selected nothing, with the reasons the topic's dead letters do have."""
    from streams import dlq as dead

    if error_type is None and since is None:
        return f"no dead letters of {topic}"
    held = {d.error_type for d in asyncio.run(dead.read(client_settings(), [topic]))}
    of = f" of type {error_type}" if error_type else ""
    after = f" since {since}" if since else ""
    types = f" (its types: {', '.join(sorted(held))})" if held else " (it holds none)"
    return f"no dead letters of {topic}{of}{after}{types}"
