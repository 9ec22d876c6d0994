"""The query service's retrieval over raw turns (first part of DESIGN §8).

Vector and full-text search over the `turns` table, both prefiltered by namespace
(and optionally session), fused with reciprocal rank (kappa = 60).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from schemas import EvidenceItem, QueryReply, QueryRequest, Role
from workers.embedding import Embedder
from workers.indexer.store import EvidenceStore

RRF_KAPPA = 60

_FTS_STRIP = re.compile(r"[^\w\s]+", re.UNICODE)


def rrf(rankings: Sequence[Sequence[str]], kappa: int = RRF_KAPPA) -> dict[str, float]:
    """Reciprocal-rank fusion: `sum over lists of 1 / (kappa + rank)`, ranks from 1."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (kappa + rank)
    return scores


class Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round((now - since) * 1e3, 3)
        return now

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self._t0) * 1e3, 3)
        return self.timings


class QueryService:
    def __init__(self, store: EvidenceStore, embedder: Embedder, candidates: int = 50) -> None:
        self.store = store
        self.embedder = embedder
        self.candidates = candidates

    async def search(self, req: QueryRequest) -> QueryReply:
        watch = Stopwatch()
        t = time.perf_counter()
        vec = (await asyncio.to_thread(self.embedder.embed, [req.query]))[0]
        t = watch.lap("embed", t)
        pool = max(self.candidates, req.k * 3)
        text = _FTS_STRIP.sub(" ", req.query)
        by_vector, by_text = await asyncio.gather(
            asyncio.to_thread(
                self.store.search_turns_vector, req.namespace, vec, pool, req.session_id
            ),
            asyncio.to_thread(
                self.store.search_turns_text, req.namespace, text, pool, req.session_id
            ),
        )
        t = watch.lap("recall", t)
        evidence = fuse_turns(by_vector, by_text, req.k)
        watch.lap("fusion", t)
        return QueryReply(
            correlation_id=req.correlation_id,
            namespace=req.namespace,
            status="ok",
            query=req.query,
            evidence=evidence,
            timings_ms=watch.total(),
            served_at=datetime.now(UTC),
        )


def fuse_turns(
    by_vector: Sequence[dict[str, Any]], by_text: Sequence[dict[str, Any]], k: int
) -> list[EvidenceItem]:
    rows = {r["id"]: r for r in [*by_text, *by_vector]}
    vec_rank = [r["id"] for r in by_vector]
    fts_rank = [r["id"] for r in by_text]
    fused = rrf([vec_rank, fts_rank])
    cos = {r["id"]: 1.0 - float(r["_distance"]) for r in by_vector}
    bm25 = {r["id"]: float(r["_score"]) for r in by_text}
    order = sorted(fused, key=lambda rid: (-fused[rid], rid))[:k]
    out = []
    for rid in order:
        r = rows[rid]
        scores = {"rrf": round(fused[rid], 6)}
        if rid in cos:
            scores["vector"] = round(cos[rid], 6)
        if rid in bm25:
            scores["fts"] = round(bm25[rid], 6)
        out.append(
            EvidenceItem(
                kind="turn",
                item_id=rid,
                text=r["text"],
                turn_ids=[r["turn_id"]],
                session_id=r["session_id"],
                speaker=r["speaker"],
                role=Role(r["role"]) if r.get("role") else None,
                date=r.get("session_date"),
                scores=scores,
            )
        )
    return out
