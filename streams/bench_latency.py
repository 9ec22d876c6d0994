"""`lychee bench latency`: retrieval latency (no LLM call) on one ingested conversation.

The conversation goes through the whole pipeline; then every question is answered twice,
one at a time: in-process by the query service's retrieval (what the service's own
`total` timing covers) and through the request/reply topics (what a client waits). The
1,000,000-record table of issue #5 is not part of this command yet.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import click

from schemas import QueryRequest
from streams.bench_locomo import BenchError, _rename, pipeline
from streams.client import MemoryClient
from streams.indexer_app import open_store
from streams.ingest import produce
from streams.lag import LagReader
from streams.models import make_embedder
from streams.settings import Settings
from workers.datasets import Conversation, load_locomo
from workers.evaluation.metrics import CATEGORIES, percentiles
from workers.query.service import QueryService


def run_latency(settings: Settings, data: Path, conversation: str | None, k: int) -> dict[str, Any]:
    convs = load_locomo(data)
    conv = next((c for c in convs if conversation in (None, c.namespace)), None)
    if conv is None:
        raise BenchError(f"no conversation {conversation} in {data}")
    _rename(conv, f"lat{uuid.uuid4().hex[:6]}-{conv.namespace}")
    with pipeline(settings, "full") as live:
        result = asyncio.run(_run(live, conv, k))
    _print(result)
    return result


async def _run(settings: Settings, conv: Conversation, k: int) -> dict[str, Any]:
    questions = [q.question for q in conv.qa if q.category in CATEGORIES]
    async with MemoryClient(settings) as client:
        await produce(client, [conv], progress=False)
        async with LagReader(settings.kafka_bootstrap) as lag:
            await lag.wait_drained(timeout_s=1800)
        svc = QueryService(open_store(settings), await asyncio.to_thread(make_embedder, settings))
        await svc.search(_request(conv.namespace, questions[0], k))  # warm caches and tables
        in_process = []
        for q in questions:
            reply = await svc.search(_request(conv.namespace, q, k))
            in_process.append(reply.timings_ms["total"])
        round_trip = []
        for q in questions:
            started = time.perf_counter()
            await client.search(conv.namespace, q, k=k, timeout_s=60)
            round_trip.append((time.perf_counter() - started) * 1e3)
    return {
        "conversation": conv.namespace,
        "turns": conv.turn_count,
        "questions": len(questions),
        "k": k,
        "retrieval_ms": percentiles(in_process),
        "round_trip_ms": percentiles(round_trip),
    }


def _request(namespace: str, query: str, k: int) -> QueryRequest:
    return QueryRequest(
        correlation_id="bench", namespace=namespace, query=query, k=k, reply_partition=0,
        deadline_ms=int((time.time() + 60) * 1000),
    )  # fmt: skip


def _print(r: dict[str, Any]) -> None:
    click.echo(f"{r['conversation']}: {r['turns']} turns, {r['questions']} questions, k={r['k']}")
    ret, rt = r["retrieval_ms"], r["round_trip_ms"]
    click.echo(f"retrieval (in-process, no LLM): p50 {ret['p50']:.1f} ms, p95 {ret['p95']:.1f} ms")
    click.echo(f"request/reply round trip:      p50 {rt['p50']:.1f} ms, p95 {rt['p95']:.1f} ms")
