"""Plan-guided multi-route recall (paper §3.5, Alg. 2 lines 4-15; DESIGN §8.3).

For every route of the plan and every query variant of the route, non-generative
searches run concurrently over evidence nodes (expanded to their linked records),
records and raw turns, each prefiltered by namespace; a temporal filter adds the
records linked to temporal nodes in range. Each route's channel lists are fused by
reciprocal rank into one route ranking; fusion across routes and selection follow in
`workers.query.selection`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from schemas.plan import Plan, QuestionType, Route, TemporalFilter
from schemas.records import NodeType
from workers.embedding import Embedder
from workers.indexer.records_store import RecordsStore
from workers.indexer.store import EvidenceStore
from workers.query.selection import RRF_KAPPA, Candidate, RouteRanking

SEARCH_NODE_TYPES = (NodeType.entity, NodeType.topic, NodeType.entity_topic, NodeType.event_frame)

# per question type: multipliers of the (node, record, turn) budgets
BUDGET_MULTIPLIERS: dict[QuestionType, tuple[float, float, float]] = {
    QuestionType.aggregate: (1.5, 1.5, 1.5),
    QuestionType.comparison: (1.2, 1.2, 1.2),
    QuestionType.temporal: (1.0, 1.0, 1.5),
    QuestionType.prior_assistant_response: (0.5, 0.5, 2.0),
}


Hit = tuple[str, dict[str, Any], float, str | None]  # item id, row, channel score, via node


@dataclass(frozen=True)
class RecallConfig:
    plan_depth: int = 15
    record_vector_only: bool = False  # ablation: records by vector search, nothing else
    type_boost: float = 1.15  # question-type score adjustment (DESIGN §8.3)
    records_per_node: int = 8  # newest linked records taken from each matched node


@dataclass
class _Acc:
    """A candidate while its channel hits are being merged within one route."""

    base: dict[str, Any]
    score: float = 0.0
    queries: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    channels: dict[str, float] = field(default_factory=dict)


class MultiRouteRecall:
    def __init__(
        self,
        turns: EvidenceStore,
        records: RecordsStore,
        embedder: Embedder,
        config: RecallConfig | None = None,
    ) -> None:
        self.turns = turns
        self.records = records
        self.embedder = embedder
        self.config = config or RecallConfig()
        self._vec_cache: dict[str, np.ndarray] = {}

    def effective_k(self, k: int) -> int:
        return max(k, self.config.plan_depth, 1)

    async def recall(
        self, plan: Plan, question: str, namespace: str, k: int, session_id: str | None = None
    ) -> list[RouteRanking]:
        texts = list(dict.fromkeys([question, *(q for r in plan.routes for q in r.queries)]))
        await self._embed(texts)
        kk = self.effective_k(k)
        return list(
            await asyncio.gather(
                *(
                    self._route(i, route, plan, question, namespace, kk, session_id)
                    for i, route in enumerate(plan.routes)
                )
            )
        )

    async def _embed(self, texts: Sequence[str]) -> None:
        """One batched call for the variants not seen before (a small per-process cache)."""
        missing = [t for t in texts if t not in self._vec_cache]
        if missing:
            matrix = await asyncio.to_thread(self.embedder.embed, missing)
            if len(self._vec_cache) > 4096:
                self._vec_cache.clear()
            self._vec_cache.update(zip(missing, matrix, strict=True))

    async def _route(
        self,
        index: int,
        route: Route,
        plan: Plan,
        question: str,
        namespace: str,
        k: int,
        session_id: str | None,
    ) -> RouteRanking:
        node_m, rec_m, turn_m = BUDGET_MULTIPLIERS.get(plan.question_type, (1.0, 1.0, 1.0))
        node_budget = int(max(3 * k, 30) * node_m)
        rec_budget = int(max(3 * k, 30) * rec_m)
        turn_budget = int(max(k, 20) * turn_m)
        queries = list(dict.fromkeys([*route.queries, question]))
        lists = await asyncio.gather(
            *(
                self._query(q, namespace, session_id, node_budget, rec_budget, turn_budget)
                for q in queries
            )
        )
        acc: dict[str, _Acc] = {}
        for q, channel_lists in zip(queries, lists, strict=True):
            for channel, rows in channel_lists:
                for rank, (item_id, row, score, node) in enumerate(rows, start=1):
                    a = acc.setdefault(item_id, _Acc(row))
                    a.score += 1.0 / (RRF_KAPPA + rank)
                    a.queries.add(q)
                    if node:
                        a.nodes.add(node)
                    a.channels[channel] = max(a.channels.get(channel, float("-inf")), score)
        window = route.temporal_filter or plan.temporal_filter
        if window is not None and not self.config.record_vector_only:
            for rank, row in enumerate(
                await asyncio.to_thread(self._temporal, namespace, window), 1
            ):
                a = acc.setdefault(record_item_id(row), _Acc(row))
                a.score += 1.0 / (RRF_KAPPA + rank)
                a.channels["temporal"] = 1.0
        for a in acc.values():
            a.score *= self._adjustment(plan.question_type, a.base)
        ranked = sorted(acc.items(), key=lambda kv: (-kv[1].score, kv[0]))
        return RouteRanking(route_id=f"r{index}", candidates=[_candidate(i, a) for i, a in ranked])

    async def _query(
        self,
        q: str,
        namespace: str,
        session_id: str | None,
        node_budget: int,
        rec_budget: int,
        turn_budget: int,
    ) -> list[tuple[str, list[Hit]]]:
        vec = self._vec_cache[q]
        rs, ts = self.records, self.turns
        if self.config.record_vector_only:
            rows = await asyncio.to_thread(rs.search_records_vector, namespace, vec, rec_budget)
            return [("record_vector", _records(rows, session_id, "_distance"))]
        calls = [
            asyncio.to_thread(
                rs.search_nodes_vector, namespace, vec, node_budget, SEARCH_NODE_TYPES
            ),
            asyncio.to_thread(rs.search_nodes_text, namespace, q, node_budget, SEARCH_NODE_TYPES),
            asyncio.to_thread(rs.search_records_vector, namespace, vec, rec_budget),
            asyncio.to_thread(rs.search_records_text, namespace, q, rec_budget),
            asyncio.to_thread(ts.search_turns_vector, namespace, vec, turn_budget, session_id),
            asyncio.to_thread(ts.search_turns_text, namespace, q, turn_budget, session_id),
        ]
        nodes_v, nodes_t, rec_v, rec_t, turn_v, turn_t = await asyncio.gather(*calls)
        linked = await asyncio.to_thread(
            self._expand_nodes, namespace, [*nodes_v, *nodes_t], node_budget
        )
        return [
            (
                "node",
                [x for x in linked if session_id is None or x[1]["source_session"] == session_id],
            ),
            ("record_vector", _records(rec_v, session_id, "_distance")),
            ("record_text", _records(rec_t, session_id, "_score")),
            ("turn_vector", _turns(turn_v, "_distance")),
            ("turn_text", _turns(turn_t, "_score")),
        ]

    def _expand_nodes(
        self, namespace: str, nodes: Sequence[dict[str, Any]], budget: int
    ) -> list[Hit]:
        """Matched nodes -> their newest linked records, best node first, `budget` in all."""
        order: dict[str, str] = {}
        for node in nodes:
            for rid in list(reversed(node.get("record_ids") or []))[: self.config.records_per_node]:
                order.setdefault(rid, node["id"])
            if len(order) >= budget:
                break
        rows = {r["id"]: r for r in self.records.records_by_ids(namespace, list(order))}
        return [
            (record_item_id(rows[r]), rows[r], 1.0, nid) for r, nid in order.items() if r in rows
        ]

    def _temporal(self, namespace: str, window: TemporalFilter) -> list[dict[str, Any]]:
        """Records linked to temporal nodes whose date falls inside the filter."""
        lo, hi = window.since or "0000", window.until or "9999"
        nodes = self.records.temporal_nodes(namespace)
        ids: list[str] = []
        for node in nodes:
            date = node["key"].split(":", 1)[1]
            if _overlaps(date, lo, hi):
                ids.extend(reversed(node.get("record_ids") or []))
        limit = max(10 * self.config.plan_depth, 100)
        return self.records.records_by_ids(namespace, list(dict.fromkeys(ids))[:limit])

    def _adjustment(self, qtype: QuestionType, row: dict[str, Any]) -> float:
        boost = self.config.type_boost
        if qtype is QuestionType.temporal and row.get("t_ref"):
            return boost
        if qtype is QuestionType.personalized_advice and row.get("memory_type") == "preference":
            return boost
        if qtype is QuestionType.prior_assistant_response and row.get("role") == "assistant":
            return boost
        return 1.0


def record_item_id(row: dict[str, Any]) -> str:
    """`namespace/record/<id>`, in the same form as a turn's `namespace/session/turn`."""
    return f"{row['namespace']}/record/{row['id']}"


def _overlaps(date: str, lo: str, hi: str) -> bool:
    """A YYYY[-MM[-DD]] date against an inclusive range of the same form."""
    return date[: len(hi)] <= hi and lo[: len(date)] <= date


def _records(rows: Sequence[dict[str, Any]], session_id: str | None, score_key: str) -> list[Hit]:
    out: list[Hit] = []
    for r in rows:
        if session_id is not None and r.get("source_session") != session_id:
            continue
        score = 1.0 - float(r[score_key]) if score_key == "_distance" else float(r[score_key])
        out.append((record_item_id(r), r, score, None))
    return out


def _turns(rows: Sequence[dict[str, Any]], score_key: str) -> list[Hit]:
    out: list[Hit] = []
    for r in rows:
        score = 1.0 - float(r[score_key]) if score_key == "_distance" else float(r[score_key])
        out.append((r["id"], r, score, None))
    return out


def _candidate(item_id: str, a: _Acc) -> Candidate:
    row = a.base
    if "semantic_text" in row:
        created = row.get("created_at")
        date = row.get("t_ref") or (
            created.date().isoformat() if isinstance(created, datetime) else None
        )
        return Candidate(
            item_id=item_id,
            kind="record",
            text=row["semantic_text"],
            session_id=row["source_session"],
            turn_ids=tuple(row.get("evidence") or ()),
            entities=tuple(row.get("entities") or ()),
            node_ids=tuple(sorted(a.nodes)),
            queries=tuple(sorted(a.queries)),
            channel_scores={**a.channels, "route_rrf": a.score},
            date=date or None,
            memory_type=row.get("memory_type"),
            role=_role(row.get("source_role")),
            mentioned=_iso(row.get("created_at")),
        )
    return Candidate(
        item_id=item_id,
        kind="turn",
        text=row["text"],
        session_id=row["session_id"],
        turn_ids=(row["turn_id"],),
        queries=tuple(sorted(a.queries)),
        channel_scores={**a.channels, "route_rrf": a.score},
        date=_iso(row.get("session_date")),
        speaker=row.get("speaker"),
        role=row.get("role"),
    )


def _role(source_role: Any) -> str | None:
    return source_role if source_role in ("user", "assistant") else None


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None
