"""`lychee up`, `lychee worker` and `lychee topics`: running the service."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from streams.apps import STAGES
from streams.cli.common import PORT, client_settings, served_settings, settings


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".lychee"),
    show_default=True,
)
@click.option(
    "--kafka-port", type=PORT, default=9092, show_default=True, help="0 picks a free port"
)
@click.option(
    "--redis-port", type=PORT, default=6379, show_default=True, help="0 picks a free port"
)
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
@click.option(
    "--gateway-port",
    type=click.IntRange(-1, 65535),
    default=8080,
    show_default=True,
    help="the HTTP gateway on loopback; 0 picks a free port, -1 starts none",
)
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
    from streams.stack.embedded import DURABLE, EPHEMERAL
    from streams.stack.errors import StackError
    from streams.stack.launcher import run_up

    s = settings()
    if grace_s is not None:
        s = s.replaced(stack={"drain_grace_s": grace_s})
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


@click.command()
@click.argument("stage", type=click.Choice(STAGES))
def worker(stage: str) -> None:
    """Run one stage against the configured Kafka, Redis and LanceDB, or, when no LYCHEE_*
    connection variable is set, the running `lychee up`'s (a second worker of a stage joins
    its consumer group and shares the work)."""
    from streams.apps import run_worker

    run_worker(stage, served_settings())


@click.group()
def topics() -> None:
    """Topic administration."""


@topics.command("create")
def topics_create() -> None:
    """Create missing topics with the configured partition count (idempotent)."""
    from streams.kafka.topics import ensure_topics, topic_retention

    s = client_settings()
    created = asyncio.run(
        ensure_topics(
            s.kafka.bootstrap,
            s.kafka.topic_partitions,
            s.kafka.topic_replication,
            topic_retention(s),
        )
    )
    click.echo(f"created {len(created)} topics" + (f": {', '.join(created)}" if created else ""))
