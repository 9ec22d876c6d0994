"""`lychee`: the command line. The root group lives here; each command group is a module:
`stack` (up, worker, topics), `data` (ingest, ask, forget, records, status), `dlq` (dead
letters), `gateway` (gateway, its keys, mcp), `bench` (the benchmarks)."""

from __future__ import annotations

import click

from streams.cli import bench, data, dlq, gateway, stack
from streams.cli.common import LycheeGroup


@click.group(cls=LycheeGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Streaming long-term memory for LLM agents."""


for command in (
    stack.up,
    stack.worker,
    stack.topics,
    data.ingest,
    data.ask,
    data.forget,
    data.records,
    data.status,
    dlq.dlq,
    gateway.gateway,
    gateway.mcp,
    bench.bench,
):
    main.add_command(command)
