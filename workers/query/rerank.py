"""Optional cross-encoder rerank within each route (DESIGN §8.4, paper Alg. 2 line 14).

FlagEmbedding's `FlagReranker` scores (question, candidate) pairs; the top of each route's
ranking is reordered by that score before routes are fused. Without a model (unset, not
found, FlagEmbedding not installed) rerank is off and the service says so once in its log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import structlog

from workers.query.selection import RouteRanking

log = structlog.get_logger("lychee.rerank")

RERANK_CANDIDATES = 100  # the paper's configured candidate limit per route


class Reranker(Protocol):
    name: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


class FlagCrossEncoder:
    """A `FlagReranker` on a local path or hub name (bge-reranker-v2-m3 in the paper)."""

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 64) -> None:
        from FlagEmbedding import FlagReranker

        self.name = model
        self._model = FlagReranker(
            model, use_fp16=False, max_length=max_length, batch_size=batch_size
        )

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        out = self._model.compute_score([(query, p) for p in passages])
        return [float(out)] if isinstance(out, int | float) else [float(x) for x in out]


def load_reranker(model: str | None) -> Reranker | None:
    """The configured cross-encoder, or None after one logged notice saying why."""
    if not model:
        log.info("rerank.off", reason="LYCHEE_RERANKER_MODEL is not set")
        return None
    try:
        return FlagCrossEncoder(model)
    except ImportError as exc:
        log.warning("rerank.off", model=model, reason=f"FlagEmbedding is not installed: {exc}")
    except Exception as exc:  # noqa: BLE001 - any load failure leaves retrieval working
        log.warning("rerank.off", model=model, reason=f"cannot load the model: {exc}")
    return None


def rerank_pool(k: int, candidates: int = RERANK_CANDIDATES) -> int:
    """`max(candidate limit, 4k)` candidates per route (paper App. C.4)."""
    return max(candidates, 4 * k)


def rerank_route(ranking: RouteRanking, query: str, reranker: Reranker, pool: int) -> RouteRanking:
    """The top `pool` candidates reordered by cross-encoder score, the rest after them.

    Ties keep the recall order; each reranked candidate carries its score as `rerank`.
    """
    head, tail = ranking.candidates[:pool], ranking.candidates[pool:]
    scores = reranker.score(query, [c.text for c in head])
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    reranked = [
        replace(head[i], channel_scores={**head[i].channel_scores, "rerank": scores[i]})
        for i in order
    ]
    return RouteRanking(route_id=ranking.route_id, candidates=[*reranked, *tail])
