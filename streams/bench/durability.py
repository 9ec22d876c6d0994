"""`lychee bench durability`: kill -9 (or Ctrl-C) `lychee up` half way through a conversation,
start it again on the same data directory, and check that nothing was lost or doubled.

Each run is a real `lychee up` subprocess on its own data directory. Undisturbed runs give
the reference records and nodes, and (with two of them) the noise between two runs of the
same input: the segmenter embeds whatever batch the broker hands it, and MiniLM's vectors
move slightly with batch composition. A disturbed run produces the first half of the
exchanges (each one acknowledged by the broker), interrupts the launcher while the stages are
still working on them, checks that no process of that run is left, starts `lychee up` again,
produces the second half and waits until every stage has drained.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import click

from schemas import topics as t
from streams.bench.harness import load_reported, pick_conversation
from streams.client import MemoryClient
from streams.kafka.lag import PIPELINE, LagReader
from streams.kafka.topics import DLQ_SOURCES
from streams.settings import Settings
from streams.stack.ready import wait_workers
from streams.stack.up_process import UpProcess
from workers.datasets import Conversation

Mode = Literal["kill", "ctrl-c"]
READY_TIMEOUT_S = 900.0


@dataclass
class Outcome:
    """What one run left in its store, and what happened to it on the way."""

    name: str
    turns: list[str] = field(default_factory=list)  # turn ids of the namespace's rows
    records: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    dead_letters: int = 0
    acked_before: int = 0
    lag_at_stop: dict[str, int] = field(default_factory=dict)
    stop_exit_code: int | None = None
    first_run_processes: int = 0
    first_run_survivors: int = 0
    restart_drain_s: float = 0.0


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def load_conversation(data: Path, conversation: str | None) -> Conversation:
    return pick_conversation(load_reported(data)[0], conversation, data)


def durability(
    data: Path, conversation: str | None, modes: tuple[Mode, ...], baselines: int, at: float
) -> list[Outcome]:
    conv = load_conversation(data, conversation)
    work = Path(tempfile.mkdtemp(prefix="lychee-durability-"))
    try:
        refs = [_run(conv, work / f"undisturbed-{i}", None, at) for i in range(baselines)]
        runs = [_run(conv, work / mode, mode, at) for mode in modes]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _print(conv, refs, runs)
    return [*refs, *runs]


def _run(conv: Conversation, data_dir: Path, mode: Mode | None, at: float) -> Outcome:
    out = Outcome(mode or "undisturbed")
    exchanges = list(conv.exchanges)
    split = round(len(exchanges) * at) if mode else len(exchanges)
    click.echo(f"[{out.name}] lychee up in {data_dir} ...", err=True)
    first = UpProcess.start(data_dir, data_dir.parent / "state")
    second: UpProcess | None = None
    try:
        settings = first.settings()
        asyncio.run(wait_workers(settings, READY_TIMEOUT_S, first.check))
        out.acked_before = asyncio.run(_produce(settings, conv, 0, split))
        if mode is None:
            asyncio.run(_drain(settings))
            asyncio.run(_collect(settings, conv.namespace, out))
            first.interrupt()
            return out
        out.lag_at_stop = asyncio.run(_lags(settings))
        first.remember_tree()
        out.first_run_processes = len(first.pids)
        if mode == "kill":
            first.kill9()
        else:
            out.stop_exit_code = first.interrupt()
        out.first_run_survivors = len(first.wait_gone(10.0))
        click.echo(f"[{out.name}] restarting on the same data directory ...", err=True)
        second = UpProcess.start(data_dir, data_dir.parent / "state")
        settings = second.settings()
        asyncio.run(wait_workers(settings, READY_TIMEOUT_S, second.check))
        started = time.perf_counter()
        asyncio.run(_produce(settings, conv, split, len(exchanges)))
        asyncio.run(_drain(settings))
        out.restart_drain_s = time.perf_counter() - started
        asyncio.run(_collect(settings, conv.namespace, out))
        second.interrupt()
        return out
    finally:
        first.cleanup()
        if second is not None:
            second.cleanup()


async def _produce(settings: Settings, conv: Conversation, start: int, stop: int) -> int:
    """Exchanges [start, stop) of the conversation in order, each session ended after its
    last exchange; returns how many the broker acknowledged."""
    acked = i = 0
    async with MemoryClient(settings) as client:
        for session in conv.sessions:
            part = [e for j, e in enumerate(session.exchanges, i) if start <= j < stop]
            i += len(session.exchanges)
            for k in range(0, len(part), 20):
                acked += await client.add(part[k : k + 20])
            if part and part[-1] is session.exchanges[-1]:
                await client.end_session(conv.namespace, session.session_id, part[-1].seq)
    return acked


async def _lags(settings: Settings) -> dict[str, int]:
    async with LagReader(settings.kafka.bootstrap) as lag:
        return {name: (await lag.stage(name)).lag for name in PIPELINE}


async def _drain(settings: Settings) -> None:
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=3600)


async def _collect(settings: Settings, namespace: str, out: Outcome) -> None:
    from streams.factories import open_store

    store = await asyncio.to_thread(open_store, settings)
    out.turns = await asyncio.to_thread(_column, store, "turns", namespace, "turn_id")
    out.records = set(await asyncio.to_thread(_column, store, "records", namespace, "id"))
    out.nodes = set(await asyncio.to_thread(_column, store, "nodes", namespace, "id"))
    async with LagReader(settings.kafka.bootstrap) as lag:
        for src in DLQ_SOURCES:
            out.dead_letters += sum((await lag.end_offsets(t.dlq(src))).values())


def _column(store: object, table: str, namespace: str, column: str) -> list[str]:
    from workers.store import namespace_filter

    tbl = store.db.table(table)  # type: ignore[attr-defined]
    if tbl is None:
        return []
    rows = tbl.search().where(namespace_filter(namespace)).select([column]).limit(None).to_list()
    return [r[column] for r in rows]


def _print(conv: Conversation, refs: list[Outcome], runs: list[Outcome]) -> None:
    produced = [tid for e in conv.exchanges for tid in e.turn_ids()]
    click.echo(
        f"conversation {conv.namespace}: {len(produced)} turns in {len(conv.sessions)} sessions; "
        "durable lychee up (Tansu on S3 served by SeaweedFS, Redis appendfsync always)"
    )
    for ref in refs:
        click.echo(
            f"  {ref.name}: turns {len(ref.turns)}, records {len(ref.records)}, "
            f"nodes {len(ref.nodes)}, dead letters {ref.dead_letters}"
        )
    if len(refs) > 1:
        a, b = refs[0], refs[1]
        click.echo(
            f"  noise between two undisturbed runs: records Jaccard {jaccard(a.records, b.records):.3f}, "
            f"nodes Jaccard {jaccard(a.nodes, b.nodes):.3f}"
        )
    first = refs[0] if refs else None
    for run in runs:
        how = "kill -9 of lychee up" if run.name == "kill" else "Ctrl-C (SIGINT) to lychee up"
        exit_note = f", exit code {run.stop_exit_code}" if run.stop_exit_code is not None else ""
        click.echo(
            f"{how} after {run.acked_before} of {len(produced)} exchanges were acked{exit_note}"
        )
        lags = ", ".join(f"{k} {v}" for k, v in run.lag_at_stop.items())
        click.echo(f"  lag at that moment: {lags}")
        click.echo(
            f"  processes of the first run alive afterwards: {run.first_run_survivors} "
            f"(of {run.first_run_processes})"
        )
        same = sorted(run.turns) == sorted(produced)
        dupes = len(run.turns) - len(set(run.turns))
        click.echo(
            f"  turns indexed {len(run.turns)} / produced {len(produced)}: "
            f"{'the same set' if same else 'DIFFERENT sets'}, {dupes} duplicates"
        )
        if first is not None:
            click.echo(
                f"  records {len(run.records)} (undisturbed {len(first.records)}, Jaccard "
                f"{jaccard(run.records, first.records):.3f}), nodes {len(run.nodes)} (undisturbed "
                f"{len(first.nodes)}, Jaccard {jaccard(run.nodes, first.nodes):.3f})"
            )
        click.echo(
            f"  dead letters {run.dead_letters}; second half produced and drained in "
            f"{run.restart_drain_s:.1f}s after the restart"
        )
