"""`lychee bench query-load`: questions per second and client latency under concurrent load.

One LoCoMo-format conversation goes through the whole pipeline; then, for each concurrency
N, a disjoint slice of its questions is asked through the request/reply topics with at most N
requests in flight (a semaphore, as an agent fleet would). Slices are disjoint so the query
service's embedding cache never answers a question a previous level already asked.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import click

from streams.bench.errors import BenchError
from streams.bench.harness import VARIANTS, load_reported, pipeline, rename_namespace
from streams.client import MemoryClient
from streams.ingest import produce
from streams.kafka.lag import LagReader
from streams.settings import Settings
from workers.evaluation.metrics import CATEGORIES, percentiles


def run_query_load(
    settings: Settings,
    data: Path,
    conversation: str | None,
    concurrency: tuple[int, ...],
    k: int,
    per_level: int,
) -> dict[str, Any]:
    convs, _ = load_reported(data)
    conv = next((c for c in convs if conversation in (None, c.namespace)), None)
    if conv is None:
        raise BenchError(f"no conversation {conversation} in {data}")
    questions = [q.question for q in conv.qa if q.category in CATEGORIES]
    if len(questions) < 1 + len(concurrency):
        raise BenchError(f"{conv.namespace} has {len(questions)} questions; too few to slice")
    rename_namespace(conv, f"load{uuid.uuid4().hex[:6]}-{conv.namespace}")
    with pipeline(settings, VARIANTS["full"]) as live:
        result = asyncio.run(_run(live, conv, questions, concurrency, k, per_level))
    print_query_load(result)
    return result


async def _run(
    settings: Settings,
    conv: Any,
    questions: list[str],
    concurrency: tuple[int, ...],
    k: int,
    per_level: int,
) -> dict[str, Any]:
    warm, rest = questions[0], questions[1:]
    size = min(per_level, len(rest) // len(concurrency))
    async with MemoryClient(settings) as client:
        await produce(client, [conv], progress=False)
        async with LagReader(settings.kafka.bootstrap) as lag:
            await lag.wait_drained(timeout_s=1800)
        await client.search(conv.namespace, warm, k=k, timeout_s=120)  # tables and model warm
        levels = []
        for i, n in enumerate(concurrency):
            asked = rest[i * size : (i + 1) * size]
            levels.append(await _level(client, conv.namespace, asked, n, k))
    return {
        "conversation": conv.namespace,
        "turns": conv.turn_count,
        "k": k,
        "questions_per_level": size,
        "levels": levels,
    }


async def _level(
    client: MemoryClient, namespace: str, asked: list[str], n: int, k: int
) -> dict[str, Any]:
    gate = asyncio.Semaphore(n)
    latencies: list[float] = []
    failed = 0

    async def one(q: str) -> None:
        nonlocal failed
        async with gate:
            started = time.perf_counter()
            try:
                await client.search(namespace, q, k=k, timeout_s=60)
            except Exception:  # a timeout or error reply counts as failed, the load goes on
                failed += 1
                return
            latencies.append((time.perf_counter() - started) * 1e3)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(q) for q in asked))
    wall = time.perf_counter() - t0
    return {
        "concurrency": n,
        "questions": len(asked),
        "failed": failed,
        "seconds": round(wall, 2),
        "questions_per_second": round(len(latencies) / wall, 2) if wall else 0.0,
        "round_trip_ms": percentiles(latencies),
    }


def print_query_load(r: dict[str, Any]) -> None:
    click.echo(
        f"{r['conversation']}: {r['turns']} turns, k={r['k']}, "
        f"{r['questions_per_level']} distinct questions per level"
    )
    for lv in r["levels"]:
        rt = lv["round_trip_ms"]
        click.echo(
            f"concurrency {lv['concurrency']:>3}: {lv['questions_per_second']:6.2f} questions/s, "
            f"round trip p50 {rt['p50']:.0f} ms, p95 {rt['p95']:.0f} ms"
            + (f", {lv['failed']} failed" if lv["failed"] else "")
        )
