"""`lychee bench throughput`: exchanges/s end to end against the raw embedding rate.

It starts the embedded stack in a temporary directory, produces synthetic exchanges, waits
until every stage has drained, and times paced probes from produce-ack to searchable. With
several stack presets (durable: Tansu on S3 and Redis fsyncing every write; ephemeral: all in
memory; durable-everysec) it runs the same measurement on each, one after the other, and
compares their rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import click
import numpy as np

from schemas import Exchange, Role, Turn
from streams.bench.harness import embedding_counts, load_reported
from streams.client import MemoryClient
from streams.kafka.lag import LagReader
from streams.settings import Settings
from streams.stack.embedded import EPHEMERAL, Stack, StackPreset
from streams.stack.ready import READY_NAMESPACE, launch, wait_ready

WORDS = (
    "river",
    "morning",
    "train",
    "coffee",
    "garden",
    "marathon",
    "recipe",
    "bread",
    "flour",
    "oven",
    "lisbon",
    "tram",
    "castle",
    "sister",
    "job",
    "office",
    "team",
    "pipeline",
    "robot",
    "data",
    "bike",
    "commute",
    "weekend",
    "dinner",
    "friend",
    "knee",
    "physio",
    "plan",
    "week",
    "mile",
    "tempo",
    "pace",
    "starter",
    "jar",
    "water",
    "market",
    "sardines",
    "ticket",
    "flight",
    "hotel",
    "museum",
    "book",
    "chapter",
    "guitar",
    "song",
    "concert",
    "rain",
    "umbrella",
    "spring",
    "summer",
    "budget",
    "invoice",
    "meeting",
)
NAMES = ("Ana", "Ben", "Chloe", "Dev", "Eli", "Fay")


def synthetic_sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(20, 40))]
    return " ".join(words).capitalize() + "."


def synthetic_exchanges(n: int, sessions: int, seed: int = 7) -> list[Exchange]:
    """`n` one-turn exchanges, round-robin over `sessions` sessions of namespace "bench"."""
    rng = random.Random(seed)
    date = datetime(2024, 1, 1, 12, 0)
    seqs = [0] * sessions
    out = []
    for i in range(n):
        j = i % sessions
        turn = Turn(
            role=Role.user,
            speaker=NAMES[i % len(NAMES)],
            content=synthetic_sentence(rng),
            turn_id=f"b{i}",
        )
        out.append(
            Exchange(
                namespace="bench",
                session_id=f"s{j}",
                seq=seqs[j],
                exchange_id=f"s{j}:{seqs[j]}",
                session_date=date,
                turns=[turn],
            )
        )
        seqs[j] += 1
    return out


def throughput(
    n: int = 2000,
    sessions: int = 20,
    probes: int = 100,
    presets: tuple[StackPreset, ...] = (EPHEMERAL,),
    data: Path | None = None,
    probe_rate: float = 20.0,
) -> list[dict[str, Any]]:
    """Exchanges/s end to end vs the raw embedding rate; produce-to-searchable p50/p95; for
    each stack preset in turn. With `data`, the exchanges and the probes are the file's
    (its first `n` exchanges, each conversation its own namespace) instead of synthetic ones."""
    source = file_exchanges(data) if data is not None else None
    results = []
    for preset in presets:
        stack = Stack(Path(tempfile.mkdtemp(prefix="lychee-bench-")), preset=preset)
        try:
            settings = launch(stack)
            exchanges = (
                source[:n] if source is not None else synthetic_exchanges(n, max(1, sessions))
            )
            result = asyncio.run(
                _throughput(stack, settings, exchanges, probes, source, probe_rate)
            )
        finally:
            stack.stop()
            shutil.rmtree(stack.data_dir, ignore_errors=True)
        result["stack"] = preset.name
        click.echo(
            f"stack: {preset.name} (broker storage {preset.storage}, "
            f"Redis appendfsync {preset.redis_fsync})"
        )
        _print_throughput(result)
        results.append(result)
    if len(results) > 1:
        _print_comparison(results)
    return results


def _print_comparison(results: list[dict[str, Any]]) -> None:
    base = results[0]
    click.echo(
        f"\n{'stack':<18} {'exchanges/s':>12} {'vs ' + base['stack']:>16} {'searchable p50':>15}"
    )
    for r in results:
        ratio = r["exchanges_per_s"] / base["exchanges_per_s"] if base["exchanges_per_s"] else 0.0
        p50 = f"{r['searchable_p50_ms']:.0f} ms" if r["searchable_p50_ms"] is not None else "-"
        click.echo(f"{r['stack']:<18} {r['exchanges_per_s']:>12.1f} {ratio:>15.2f}x {p50:>15}")


async def _throughput(
    stack: Stack,
    settings: Settings,
    exchanges: list[Exchange],
    probes: int,
    source: list[Exchange] | None,
    probe_rate: float,
) -> dict[str, Any]:
    from streams.factories import model_embedder

    await wait_ready(stack, settings, timeout_s=900)
    n = len(exchanges)
    texts = [ex.remembered() for ex in exchanges]  # what the segmenter embeds

    # (a) raw embedding rate of the workers' backend, in this process, while they are idle
    embedder = await asyncio.to_thread(
        model_embedder, settings.replaced(embedding={"batch_size": 64})
    )
    await asyncio.to_thread(embedder.embed, texts[:64])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        await asyncio.to_thread(embedder.embed, texts[i : i + 64])
    raw_rate = len(texts) / (time.perf_counter() - t0)
    del embedder

    async with MemoryClient(settings) as client, LagReader(settings.kafka.bootstrap) as lag:
        # warm the indexer (table and index creation happen once) before timing
        warm = Exchange(
            namespace=READY_NAMESPACE,
            session_id="warm",
            seq=0,
            exchange_id="warm:0",
            turns=[
                Turn(role=Role.user, speaker="Ana", content="warming up the pipeline", turn_id="w0")
            ],
        )
        await client.add([warm])
        await client.end_session(READY_NAMESPACE, "warm", after_seq=0)
        await lag.wait_drained(timeout_s=120)
        before = (await embedding_counts(settings, n))["model_texts"]

        # (b) end to end: produce everything, end every session, wait until indexed
        t0 = time.perf_counter()
        for i in range(0, n, 200):
            await client.add(exchanges[i : i + 200])
        produce_s = time.perf_counter() - t0
        last: dict[tuple[str, str], int] = {}
        for ex in exchanges:
            last[(ex.namespace, ex.session_id)] = ex.seq
        for (ns, sid), seq in last.items():
            await client.end_session(ns, sid, after_seq=seq)
        await lag.wait_drained(timeout_s=max(600.0, n / 2))
        e2e_s = time.perf_counter() - t0
        after = (await embedding_counts(settings, n))["model_texts"]

        # (c) produce-ack to searchable, one exchange at a time at `probe_rate`
        make = partial(file_probe, source) if source else synthetic_probe
        latencies, missing = await _probe_latency(settings, client, probes, make, probe_rate)

    e2e_rate = n / e2e_s if e2e_s > 0 else 0.0
    return {
        "exchanges": n,
        "sessions": len({(ex.namespace, ex.session_id) for ex in exchanges}),
        "source": "file" if source else "synthetic",
        "probe_rate": probe_rate,
        "produce_seconds": produce_s,
        "seconds": e2e_s,
        "exchanges_per_s": e2e_rate,
        "raw_embedding_texts_per_s": raw_rate,
        "ratio_end_to_end_to_raw": e2e_rate / raw_rate if raw_rate else 0.0,
        # texts the ingest stages' models embedded per exchange during (b): the ratio above
        # divided by this is the share of raw embedding capacity the pipeline achieved
        "embeddings_per_exchange": (after - before) / n,
        "probes": probes,
        "probes_missing": missing,
        "searchable_p50_ms": float(np.percentile(latencies, 50)) * 1e3 if latencies else None,
        "searchable_p95_ms": float(np.percentile(latencies, 95)) * 1e3 if latencies else None,
        "searchable_max_ms": max(latencies) * 1e3 if latencies else None,
    }


def synthetic_probe(i: int, rng: random.Random) -> Exchange:
    """A one-sentence exchange of a session of its own, its turn called `probe-<i>`."""
    turn = Turn(
        role=Role.user, speaker="Ana", content=synthetic_sentence(rng), turn_id=f"probe-{i}"
    )
    return Exchange(
        namespace="probe", session_id=f"p{i}", seq=0, exchange_id=f"p{i}:0", turns=[turn]
    )


def file_probe(source: list[Exchange], i: int, rng: random.Random) -> Exchange:
    """The file's exchange `i` (cycled) as a session of its own, its first turn `probe-<i>`:
    a probe as long as the conversations the file holds."""
    ex = source[i % len(source)]
    turns = [
        t.model_copy(update={"turn_id": f"probe-{i}" if j == 0 else f"probe-{i}-{j}"})
        for j, t in enumerate(ex.turns)
    ]
    return ex.model_copy(
        update={
            "namespace": "probe",
            "session_id": f"p{i}",
            "seq": 0,
            "exchange_id": f"p{i}:0",
            "turns": turns,
        }
    )


def file_exchanges(data: Path) -> list[Exchange]:
    """Every exchange of a LoCoMo-layout file in order, each conversation in a namespace of
    its own (`bench-<conversation>`)."""
    convs, _ = load_reported(data)
    return [
        ex.model_copy(update={"namespace": f"bench-{conv.namespace}"})
        for conv in convs
        for ex in conv.exchanges
    ]


async def _probe_latency(
    settings: Settings,
    client: MemoryClient,
    probes: int,
    make: Callable[[int, random.Random], Exchange],
    rate_hz: float = 20.0,
    timeout_s: float = 60.0,
) -> tuple[list[float], int]:
    from streams.factories import open_store

    store = open_store(settings)
    rng = random.Random(11)
    acked: dict[str, float] = {}
    seen: dict[str, float] = {}
    done = asyncio.Event()

    async def poll() -> None:
        while True:
            ids = await asyncio.to_thread(store.turns.ids, "probe")
            now = time.perf_counter()  # after the read: never claims faster than it was
            for tid in ids:
                seen.setdefault(tid, now)
            if done.is_set() and acked.keys() <= seen.keys():
                return
            await asyncio.sleep(0.02)

    poller = asyncio.create_task(poll())
    try:
        for i in range(probes):
            ex = make(i, rng)
            sent = time.perf_counter()
            await client.add([ex])
            acked[f"probe-{i}"] = time.perf_counter()
            await asyncio.sleep(max(0.0, sent + 1 / rate_hz - time.perf_counter()))
        done.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(poller), timeout_s)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    latencies = [seen[t] - acked[t] for t in acked if t in seen]
    return latencies, len(acked) - len(latencies)


def _print_throughput(r: dict[str, Any]) -> None:
    click.echo(
        f"exchanges:                 {r['exchanges']} in {r['sessions']} sessions (produced in {r['produce_seconds'] * 1e3:.0f} ms)"
    )
    click.echo(f"seconds (produce->indexed): {r['seconds']:.1f}")
    click.echo(f"exchanges/s end to end:    {r['exchanges_per_s']:.1f}")
    click.echo(
        f"raw embedding texts/s:     {r['raw_embedding_texts_per_s']:.1f} (the workers' backend, batches of 64, bench process)"
    )
    click.echo(
        f"end to end / raw:          {r['ratio_end_to_end_to_raw']:.2f} "
        f"(embeddings per exchange: {r['embeddings_per_exchange']:.2f})"
    )
    if r["searchable_p50_ms"] is None:
        click.echo(f"searchable latency:        no probe became searchable ({r['probes']} sent)")
        return
    missing = f", {r['probes_missing']} never seen" if r["probes_missing"] else ""
    click.echo(
        f"produce-ack to searchable: p50 {r['searchable_p50_ms']:.0f} ms, p95 {r['searchable_p95_ms']:.0f} ms, "
        f"max {r['searchable_max_ms']:.0f} ms ({r['probes']} {r['source']} probes at ~{r['probe_rate']:g}/s{missing})"
    )
