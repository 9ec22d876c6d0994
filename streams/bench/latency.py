"""`lychee bench latency`: retrieval latency (no LLM call), at two scales.

LoCoMo scale: one conversation goes through the whole pipeline; then every question is
answered twice, one at a time: in-process by the query service's retrieval (what the
service's own `total` timing covers) and through the request/reply topics (what a client
waits).

Production scale: a synthetic store (`workers.evaluation.synthetic`) of N records, as
many raw turns and N/2 evidence nodes over M namespaces, with the ANN indexes built; the
query service answers questions about one namespace. The same searches are also run
without the vector index, to report what the ANN index costs in recall.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import click
import numpy as np
from tqdm import tqdm

from schemas import QueryRequest
from streams.apps.collection import collect_as_a_worker
from streams.bench.errors import BenchError
from streams.bench.harness import VARIANTS, load_reported, pipeline, rename_namespace
from streams.client import MemoryClient
from streams.factories import adapter_of, make_embedder, open_store, scorer_of
from streams.ingest import produce
from streams.kafka.lag import LagReader
from streams.settings import Settings
from workers.datasets import Conversation
from workers.evaluation import synthetic
from workers.evaluation.metrics import CATEGORIES, percentiles
from workers.query.service import QueryDeps, QueryService
from workers.store import RECORDS, EvidenceStore, namespace_filter
from workers.store.database import has_ann


def run_latency(
    settings: Settings, data: Path, conversation: str | None, k: int, beside: str | None = None
) -> dict[str, Any]:
    """`beside`: another conversation of the file, ingested into its own namespace while the
    first one's questions are asked again (one tenant asking while another writes)."""
    convs, _ = load_reported(data)
    conv = next((c for c in convs if conversation in (None, c.namespace)), None)
    if conv is None:
        raise BenchError(f"no conversation {conversation} in {data}")
    other = None
    if beside is not None:
        other = next((c for c in convs if c.namespace == beside), None)
        if other is None or other is conv:
            raise BenchError(f"--beside needs another conversation of {data}, not {beside}")
    run = uuid.uuid4().hex[:6]
    for c in (conv, other):
        if c is not None:
            rename_namespace(c, f"lat{run}-{c.namespace}")
    with pipeline(settings, VARIANTS["full"]) as live:
        result = asyncio.run(_run(live, conv, k, other))
    print_locomo(result)
    return result


async def _run(
    settings: Settings, conv: Conversation, k: int, other: Conversation | None = None
) -> dict[str, Any]:
    questions = [q.question for q in conv.qa if q.category in CATEGORIES]
    async with MemoryClient(settings) as client:
        await produce(client, [conv], progress=False)
        async with LagReader(settings.kafka.bootstrap) as lag:
            await lag.wait_drained(timeout_s=1800)
        embedder = await asyncio.to_thread(make_embedder, settings)
        store = open_store(settings, embedder, snapshots=True)  # as the query service opens it
        collect_as_a_worker()  # as a query worker does
        svc = QueryService(
            QueryDeps(
                store, embedder, scorer=scorer_of(settings), adapter=adapter_of(settings, embedder)
            )
        )
        await svc.search(_request(conv.namespace, questions[0], k))  # warm caches and tables
        stages: dict[str, list[float]] = {}
        for q in questions:
            reply = await svc.search(_request(conv.namespace, q, k))
            for name, ms in reply.timings_ms.items():
                stages.setdefault(name, []).append(ms)
        round_trip = [await _round_trip(client, conv.namespace, q, k) for q in questions]
        beside = None
        if other is not None:
            beside = await _beside_ingest(settings, client, conv.namespace, questions, k, other)
    return {
        "conversation": conv.namespace,
        "turns": conv.turn_count,
        "questions": len(questions),
        "k": k,
        "retrieval_ms": percentiles(stages["total"]),
        "round_trip_ms": percentiles(round_trip),
        # each stage of the reply's timings (recall.<channel> run concurrently in recall)
        "stages_ms": {n: percentiles(v) for n, v in stages.items() if n != "total"},
        "beside": beside,
    }


async def _round_trip(client: MemoryClient, namespace: str, question: str, k: int) -> float:
    started = time.perf_counter()
    await client.search(namespace, question, k=k, timeout_s=60)
    return (time.perf_counter() - started) * 1e3


async def _beside_ingest(
    settings: Settings,
    client: MemoryClient,
    namespace: str,
    questions: list[str],
    k: int,
    other: Conversation,
) -> dict[str, Any]:
    """The questions asked again, in turn, from when `other` is produced until the stack has
    ingested it: round trips while the indexer keeps writing another namespace."""
    await produce(client, [other], progress=False)
    async with LagReader(settings.kafka.bootstrap) as lag:
        drained = asyncio.create_task(lag.wait_drained(timeout_s=1800))
        ms: list[float] = []
        started = time.perf_counter()
        while not ms or not drained.done():  # one question at least, however quick
            ms.append(await _round_trip(client, namespace, questions[len(ms) % len(questions)], k))
        await drained
    return {
        "conversation": other.namespace,
        "turns": other.turn_count,
        "ingest_s": round(time.perf_counter() - started, 1),
        "questions": len(ms),
        "round_trip_ms": percentiles(ms),
    }


def _request(namespace: str, query: str, k: int) -> QueryRequest:
    return QueryRequest(
        correlation_id="bench",
        namespace=namespace,
        query=query,
        k=k,
        reply_partition=0,
        deadline_ms=int((time.time() + 60) * 1000),
    )


def print_locomo(r: dict[str, Any]) -> None:
    click.echo(f"{r['conversation']}: {r['turns']} turns, {r['questions']} questions, k={r['k']}")
    ret, rt = r["retrieval_ms"], r["round_trip_ms"]
    click.echo(f"retrieval (in-process, no LLM): p50 {ret['p50']:.1f} ms, p95 {ret['p95']:.1f} ms")
    click.echo(f"request/reply round trip:      p50 {rt['p50']:.1f} ms, p95 {rt['p95']:.1f} ms")
    for name, ms in r["stages_ms"].items():
        click.echo(f"  {name:<28} p50 {ms['p50']:7.1f} ms, p95 {ms['p95']:7.1f} ms")
    if b := r.get("beside"):
        rt = b["round_trip_ms"]
        click.echo(
            f"round trip while {b['conversation']} ({b['turns']} turns) is ingested, "
            f"{b['ingest_s']:.0f} s, {b['questions']} questions: "
            f"p50 {rt['p50']:.1f} ms, p95 {rt['p95']:.1f} ms"
        )


def run_synthetic(
    settings: Settings,
    records: int,
    namespaces: int,
    k: int,
    store_dir: Path,
    questions: int = 200,
) -> dict[str, Any]:
    """Build (or reuse, when `store_dir` already holds the same shape) the synthetic store,
    then time `questions` retrievals in one namespace, one at a time."""
    embedder = make_embedder(settings)
    store = open_store(settings, embedder, str(store_dir))
    rs = store
    build_s = ann_s = 0.0
    if rs.count(RECORDS) != records or rs.count(RECORDS, synthetic.namespace(0)) != (
        records // namespaces
    ):
        if rs.count(RECORDS):
            raise BenchError(f"{store_dir} holds another store; point --store at a new directory")
        started = time.perf_counter()
        total = records * 5 // 2
        with tqdm(total=total, unit="row", desc="synthetic store", leave=False) as bar:
            synthetic.build(
                store, embedder, records, namespaces, progress=lambda _, n: bar.update(n)
            )
        build_s = time.perf_counter() - started
    started = time.perf_counter()
    built = rs.maybe_build_ann(min(settings.store.ann_min_rows, records // 2))
    ann_s = time.perf_counter() - started if built else 0.0
    target = synthetic.namespace(namespaces // 2)
    asked = synthetic.questions(questions)
    served = open_store(settings, embedder, str(store_dir), snapshots=True)  # as the service
    timings = asyncio.run(_timed(QueryService(QueryDeps(served, embedder)), target, asked, k))
    # the same questions with every vector search through the ANN index
    every_ann = settings.replaced(store={"exact_search_max_rows": 0})
    ann_store = open_store(every_ann, embedder, str(store_dir))
    ann_timings = asyncio.run(
        _timed(QueryService(QueryDeps(ann_store, embedder)), target, asked, k)
    )
    return {
        "records": records,
        "namespaces": namespaces,
        "rows": {name: rs.count(name) for name in ("records", "turns", "nodes")},
        "namespace": target,
        "questions": len(asked),
        "k": k,
        "build_s": round(build_s, 1),
        "ann_index_s": round(ann_s, 1),
        "ann_indexed": [n for n in ("records", "turns", "nodes") if _has_ann(rs, n)],
        "retrieval_ms": percentiles([t["total"] for t in timings]),
        "recall_ms": percentiles([t["recall"] for t in timings]),
        "exact_max_rows": settings.store.exact_search_max_rows,
        "retrieval_ann_ms": percentiles([t["total"] for t in ann_timings]),
        "ann_vs_exact": _ann_vs_exact(rs, embedder.embed(asked[:50]), target, 3 * max(k, 15)),
    }


async def _timed(svc: QueryService, ns: str, asked: list[str], k: int) -> list[dict[str, float]]:
    await svc.search(_request(ns, asked[0], k))  # warm caches and tables
    return [(await svc.search(_request(ns, q, k))).timings_ms for q in asked]


def _has_ann(rs: EvidenceStore, name: str) -> bool:
    tbl = rs.table(name)
    return tbl is not None and has_ann(tbl)


def _ann_vs_exact(rs: EvidenceStore, vectors: np.ndarray, ns: str, limit: int) -> dict[str, float]:
    """Overlap of the records channel's ANN results with an exact search, and both timings."""
    tbl = rs.table(RECORDS)
    assert tbl is not None
    overlap, ann_ms, exact_ms = [], [], []
    for vec in vectors:
        q = (
            tbl.search(np.asarray(vec, dtype=np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .where(namespace_filter(ns), prefilter=True)
            .select(["id", "_distance"])
            .limit(limit)
        )
        started = time.perf_counter()
        ann = {r["id"] for r in q.to_list()}
        ann_ms.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        exact = {r["id"] for r in q.bypass_vector_index().to_list()}
        exact_ms.append((time.perf_counter() - started) * 1e3)
        overlap.append(len(ann & exact) / max(len(exact), 1))
    return {
        "recall": round(float(np.mean(overlap)), 4),
        "ann_p50_ms": round(float(np.median(ann_ms)), 2),
        "exact_p50_ms": round(float(np.median(exact_ms)), 2),
    }


def print_synthetic(r: dict[str, Any]) -> None:
    rows = ", ".join(f"{n} {c:,}" for n, c in r["rows"].items())
    click.echo(f"synthetic store: {rows} over {r['namespaces']:,} namespaces")
    built = f"built in {r['build_s']} s" if r["build_s"] else "reused"
    ann = f"built in {r['ann_index_s']} s" if r["ann_index_s"] else "present"
    click.echo(f"store {built}; ANN indexes on {', '.join(r['ann_indexed']) or 'none'} {ann}")
    ret, rec, ann_ret = r["retrieval_ms"], r["recall_ms"], r["retrieval_ann_ms"]
    click.echo(
        f"{r['namespace']}: {r['questions']} questions, k={r['k']}; retrieval (no LLM): "
        f"p50 {ret['p50']:.1f} ms, p95 {ret['p95']:.1f} ms (recall stage p50 {rec['p50']:.1f} ms); "
        f"namespaces up to {r['exact_max_rows']:,} rows are searched exactly"
    )
    click.echo(
        f"same questions, every vector search through the ANN index: "
        f"p50 {ann_ret['p50']:.1f} ms, p95 {ann_ret['p95']:.1f} ms"
    )
    a = r["ann_vs_exact"]
    click.echo(
        f"records channel, ANN vs exact search: overlap {a['recall']:.3f}, "
        f"p50 {a['ann_p50_ms']:.1f} ms vs {a['exact_p50_ms']:.1f} ms"
    )
