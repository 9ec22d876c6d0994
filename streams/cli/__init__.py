"""`lychee`: the command line. The root group lives here; each command group is a module:
`stack` (up, worker, topics), `data` (ingest, ask, forget, records, status), `dlq` (dead
letters), `gateway` (gateway, its keys, mcp), `bench` (the benchmarks)."""

from __future__ import annotations

import click

from streams.cli import data, dlq, gateway, stack
from streams.cli.common import LycheeGroup


class _Lychee(LycheeGroup):
    """`bench` is imported only when asked for: it loads the whole query path (LanceDB, the
    LLM client; seconds), which no other command needs, least of all `lychee mcp`, whose
    host gives it a few seconds to answer."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), "bench"})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "bench":
            from streams.cli.bench import bench

            return bench
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Lychee, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lychee-memory", prog_name="lychee")
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
):
    main.add_command(command)
