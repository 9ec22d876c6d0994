"""`lychee bench`: the benchmarks, each printing its figures. The commands live by what they
measure: `quality` (what the memory finds and answers), `speed` (rates and latencies), and
`faults` (what survives kills, outages and hostile input)."""

from __future__ import annotations

import click

from streams.cli.bench import faults, quality, speed


@click.group()
def bench() -> None:
    """Benchmarks that print figures."""


for command in (
    quality.bench_locomo,
    quality.bench_longmemeval,
    quality.bench_llm,
    quality.bench_judge,
    quality.bench_segmentation,
    speed.bench_throughput,
    speed.bench_latency,
    speed.bench_query_load,
    speed.bench_embedder,
    speed.bench_gateway,
    faults.bench_durability,
    faults.bench_chaos,
    faults.bench_fuzz,
    faults.bench_llm_outage,
):
    bench.add_command(command)
