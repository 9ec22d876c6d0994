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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache, partial
from typing import Any, NamedTuple

import numpy as np

from schemas.plan import Plan, QuestionType, TemporalFilter
from schemas.records import NodeType
from workers import telemetry
from workers.concurrency import gather_bounded
from workers.embedding import Embedder, embed_queries
from workers.query.adapter import QueryAdapter
from workers.query.hits import (
    Channel,
    Linked,
    candidate_fields,
    channels,
    is_record,
    record_hits,
    record_item_id,
    turns_of,
)
from workers.query.passages import Shown, request_terms, show_passages
from workers.query.presets import SERVED, QueryPreset, WithAssistant
from workers.query.selection import HEAD_SCORE, RRF_KAPPA, Candidate, RouteRanking
from workers.query.timing import ChannelTimes
from workers.query.windows import WINDOW_TOKENS, spans, windows
from workers.store import EvidenceStore

SEARCH_NODE_TYPES = (NodeType.entity, NodeType.topic, NodeType.entity_topic, NodeType.event_frame)


def _traced_route(index: int, queries: int, rank: Callable[[], RouteRanking]) -> RouteRanking:
    """One route's ranking, as the span `query.recall.route`."""
    attrs = {"lychee.route.index": index, "lychee.route.queries": queries}
    with telemetry.span("query.recall.route", attributes=attrs) as span:
        ranking = rank()
        found = {
            "lychee.route.id": ranking.route_id,
            "lychee.route.candidates": len(ranking.candidates),
        }
        telemetry.set_attributes(span, found)
    return ranking


class Budgets(NamedTuple):
    """Candidates asked of each table, or multipliers of those counts."""

    nodes: float
    records: float
    turns: float


# per question type: multipliers of the budgets
BUDGET_MULTIPLIERS: dict[QuestionType, Budgets] = {
    QuestionType.aggregate: Budgets(1.5, 1.5, 1.5),
    QuestionType.comparison: Budgets(1.2, 1.2, 1.2),
    QuestionType.temporal: Budgets(1.0, 1.0, 1.5),
    QuestionType.prior_assistant_response: Budgets(0.5, 0.5, 2.0),
}
_SAME = Budgets(1.0, 1.0, 1.0)


@dataclass(frozen=True)
class RecallConfig:
    """How the service's recall is set up; what a request's recall runs and weighs is its
    query preset's (`workers.query.presets`)."""

    plan_depth: int = 15
    type_boost: float = 1.15  # question-type score adjustment (DESIGN §8.3)
    records_per_node: int = 8  # newest linked records taken from each matched node
    turn_window: int = 1  # raw-turn hits expand to this many turns either side (0: off)
    window_tokens: int = WINDOW_TOKENS  # ... as long as the window stays this small
    max_concurrent_searches: int = 6  # table searches of one request running at once


@dataclass(slots=True)
class _Acc:
    """A candidate while its channel hits are being merged within one route."""

    base: dict[str, Any]
    score: float = 0.0
    head: float = 0.0  # the same fusion with the head's kappa: what the first items are chosen by
    queries: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    channels: dict[str, float] = field(default_factory=dict)


class MultiRouteRecall:
    def __init__(
        self,
        store: EvidenceStore,
        embedder: Embedder,
        config: RecallConfig | None = None,
        adapter: QueryAdapter | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.adapter = adapter  # moves question vectors toward answers (stored ones stay)
        self.config = config or RecallConfig()
        self._vec_cache: dict[str, np.ndarray] = {}

    def effective_k(self, k: int) -> int:
        return max(k, self.config.plan_depth, 1)

    def vector(self, text: str) -> np.ndarray:
        """A question's vector as recall searched with it, or embedded alone again when the
        cache has let it go since."""
        found = self._vec_cache.get(text)
        return found if found is not None else self._question_vectors([text])[0]

    async def recall(
        self,
        plan: Plan,
        question: str,
        namespace: str,
        k: int,
        session_id: str | None = None,
        *,
        preset: QueryPreset = SERVED,
        timings: dict[str, float] | None = None,
        depth: int | None = None,
    ) -> list[RouteRanking]:
        """Every route's ranking; searches are shared by the routes that use a variant.

        `preset`: what recall runs and how a route weighs its candidates. Its
        `record_vector_only` (the paper's ablation) recalls records by vector search, nothing
        else; its `skip_nodes` are evidence-node types left out (temporal: no date route).
        `timings`, when given, receives the milliseconds of each channel as `recall.<channel>`.
        `depth`: how much of a lone route's ranking the caller reads (its first `depth`
        candidates are all it gets). With several routes every candidate is kept: one ranked
        low in a route still counts in that route's agreement.
        """
        clock = ChannelTimes()
        variants = list(dict.fromkeys([question, *(q for r in plan.routes for q in r.queries)]))
        await self._embed(variants, clock)
        kk = self.effective_k(k)
        m = BUDGET_MULTIPLIERS.get(plan.question_type, _SAME)
        budgets = Budgets(
            int(max(3 * kk, 30) * m.nodes),
            int(max(3 * kk, 30) * m.records),
            int(max(kk, 20) * m.turns),
        )
        route_texts = [_fts_text([*r.queries, question]) for r in plan.routes]
        only, skip = preset.record_vector_only, preset.skip_nodes
        hits, fts, weights = await self._search(
            variants,
            route_texts,
            namespace,
            session_id,
            budgets,
            only,
            clock,
            tuple(t for t in SEARCH_NODE_TYPES if t not in skip),
            preset.with_assistant,
        )
        dates = not only and NodeType.temporal not in skip
        filters = [
            r.temporal_filter or plan.temporal_filter if dates else None for r in plan.routes
        ]
        dated = await self._dated(namespace, filters, clock)
        if timings is not None:
            timings.update({f"recall.{k}": round(v, 3) for k, v in clock.ms.items()})

        def rankings() -> list[RouteRanking]:
            items: dict[str, dict[str, Any]] = {}  # each item's row fields, read once
            return [
                _traced_route(
                    i,
                    len(route.queries),
                    partial(
                        self._ranking,
                        i,
                        [*route.queries, question],
                        hits,
                        fts.get(route_texts[i], []),
                        plan,
                        dated[f] if f is not None else [],
                        f,
                        items,
                        depth if len(plan.routes) == 1 else None,
                        preset,
                        weights,
                    ),
                )
                for i, (route, f) in enumerate(zip(plan.routes, filters, strict=True))
            ]

        # about a thousand candidates a route at k = 100: off the loop other requests share
        return await asyncio.to_thread(rankings)

    async def _dated(
        self, namespace: str, filters: list[TemporalFilter | None], clock: ChannelTimes
    ) -> dict[TemporalFilter, list[dict[str, Any]]]:
        """The records of the routes' date filters, each filter searched once."""
        distinct = list(dict.fromkeys(f for f in filters if f is not None))
        found = await asyncio.gather(
            *(
                asyncio.to_thread(clock.call, "temporal", self._temporal, namespace, f)
                for f in distinct
            )
        )
        return dict(zip(distinct, found, strict=True))

    async def _embed(self, texts: Sequence[str], clock: ChannelTimes) -> None:
        """One batched call for the variants not seen before (a small per-process cache)."""
        missing = [t for t in texts if t not in self._vec_cache]
        if missing:
            matrix = await asyncio.to_thread(clock.call, "embed", self._question_vectors, missing)
            if len(self._vec_cache) > 4096:
                self._vec_cache.clear()
            self._vec_cache.update(zip(missing, matrix, strict=True))

    def _question_vectors(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(embed_queries(self.embedder, texts))
        return vectors if self.adapter is None else self.adapter.apply(vectors)

    async def _search(
        self,
        variants: list[str],
        route_texts: list[str],
        namespace: str,
        session_id: str | None,
        budgets: Budgets,
        record_vector_only: bool,
        clock: ChannelTimes,
        node_types: tuple[NodeType, ...],
        with_assistant: WithAssistant | None,
    ) -> tuple[dict[str, list[Channel]], dict[str, list[Channel]], dict[str, float]]:
        """Vector channels per variant (one multi-vector search per table), full-text
        channels per route (one query with the words of all its variants: BM25 scores term by
        term, so a query per variant would repeat the same lookups), and the channels'
        weights in fusion: `with_assistant`'s when the turns found include an assistant's."""
        node_b, rec_b, turn_b = int(budgets.nodes), int(budgets.records), int(budgets.turns)
        vecs = np.stack([self._vec_cache[v] for v in variants])
        st, ns = self.store, namespace
        if record_vector_only:
            only = await self._search_records_only(variants, vecs, ns, session_id, rec_b, clock)
            return only, {}, {}
        texts = list(dict.fromkeys(route_texts))
        # every table search of the request, keyed by (how, table, route text)
        calls: dict[tuple[str, str, str], Any] = {
            ("vector", "nodes", ""): (st.nodes.search_vectors, vecs, node_b, node_types),
            ("vector", "records", ""): (st.records.search_vectors, vecs, rec_b),
            ("vector", "turns", ""): (st.turns.search_vectors, vecs, turn_b, session_id),
        }
        for t in texts:
            calls["text", "nodes", t] = (st.nodes.search_text, t, node_b, node_types)
            calls["text", "records", t] = (st.records.search_text, t, rec_b)
            calls["text", "turns", t] = (st.turns.search_text, t, turn_b, session_id)
        found = await gather_bounded(
            (
                asyncio.to_thread(clock.call, f"{table[:-1]}_{how}", fn, ns, *args)
                for (how, table, _), (fn, *args) in calls.items()
            ),
            self.config.max_concurrent_searches,
        )
        got = dict(zip(calls, found, strict=True))
        show = Shown(request_terms(variants))
        # long turns cut into passages: CPU work, off the loop other requests share
        turn_rows = await asyncio.to_thread(clock.call, "passages", show_passages, got, show)
        chat = with_assistant if any(r.get("role") == "assistant" for r in turn_rows) else None
        node_lists = [*got["vector", "nodes", ""], *(got["text", "nodes", t] for t in texts)]
        orders = [self._linked(nodes, node_b) for nodes in node_lists]
        wanted = list(dict.fromkeys(rid for order in orders for rid in order))
        records_found, around = await asyncio.gather(
            asyncio.to_thread(clock.call, "links", st.records.by_ids, ns, wanted),
            asyncio.to_thread(clock.call, "windows", self._windows, ns, turn_rows, show),
        )
        linked = Linked({r["id"]: r for r in records_found}, session_id)
        per_variant, per_route = channels(got, variants, texts, orders, linked, around)
        return per_variant, per_route, dict(chat.channel_weights if chat else ())

    async def _search_records_only(
        self,
        variants: list[str],
        vecs: Any,
        namespace: str,
        session_id: str | None,
        limit: int,
        clock: ChannelTimes,
    ) -> dict[str, list[Channel]]:
        """The `record-vector-only` ablation: one vector channel over records per variant."""
        found = await asyncio.to_thread(
            clock.call, "record_vector", self.store.records.search_vectors, namespace, vecs, limit
        )
        only = {
            v: [Channel("record_vector", record_hits(rows, session_id, "_distance"))]
            for v, rows in zip(variants, found, strict=True)
        }
        return only

    def _windows(
        self,
        namespace: str,
        hits: list[dict[str, Any]],
        show: Shown,
    ) -> dict[str, dict[str, Any]]:
        """Raw-turn hits -> their windows of neighbouring turns (one read for all hits); a
        long neighbour takes part as the passage the request matches."""
        radius = self.config.turn_window
        if radius <= 0 or not hits:
            return {}
        near = [show(r) for r in self.store.turns.near(namespace, spans(hits, radius))]
        return windows(hits, near, radius, self.config.window_tokens)

    def _linked(self, nodes: Sequence[dict[str, Any]], budget: int) -> dict[str, str]:
        """Matched nodes -> their newest linked record ids, best node first, `budget` in all."""
        order: dict[str, str] = {}
        for node in nodes:
            ids = node.get("record_ids") or []
            for rid in ids[max(len(ids) - self.config.records_per_node, 0) :][::-1]:
                order.setdefault(rid, node["id"])  # newest first
            if len(order) >= budget:
                break
        return order

    def _ranking(
        self,
        index: int,
        queries: list[str],
        hits: dict[str, list[Channel]],
        text_hits: list[Channel],
        plan: Plan,
        dated: list[dict[str, Any]],
        window: TemporalFilter | None,
        items: dict[str, dict[str, Any]],
        depth: int | None,
        preset: QueryPreset,
        weights: dict[str, float],
    ) -> RouteRanking:
        """One route: its channel lists fused by reciprocal rank, then adjusted by type; the
        first `depth` candidates, or all. Each candidate carries the fusion twice: with
        RRF_KAPPA (`route_rrf`, the order) and with the preset's `head_kappa` (`HEAD_SCORE`,
        the head's); records credited by their turns and candidates said on a day the
        route's dates name boosted as the preset says."""
        acc: dict[str, _Acc] = {}
        lists = [(q, ch) for q in dict.fromkeys(queries) for ch in hits[q]]
        lists += [("", ch) for ch in text_hits]
        longest = max((len(rows) for _, (_, rows) in lists), default=0)
        head_kappa = preset.head_kappa
        rrf, head = _reciprocal(RRF_KAPPA, longest), _reciprocal(head_kappa, longest)
        for q, (channel, rows) in lists:  # the hottest loop of a request: plain operations
            w = weights.get(channel, 1.0)
            for rank, (item_id, row, score, node) in enumerate(rows):
                a = acc.get(item_id)
                if a is None:
                    a = acc[item_id] = _Acc(row)
                a.score += w * rrf[rank]
                a.head += w * head[rank]
                if q:
                    a.queries.add(q)
                if node:
                    a.nodes.add(node)
                best = a.channels.get(channel)
                if best is None or score > best:
                    a.channels[channel] = score
        for rank, row in enumerate(dated, 1):
            a = acc.setdefault(record_item_id(row), _Acc(row))
            a.score += 1.0 / (RRF_KAPPA + rank)
            a.head += 1.0 / (head_kappa + rank)
            a.channels["temporal"] = 1.0
        _credit_records(acc, preset.turn_credit, preset.turn_credit_head)
        for a in acc.values():
            boost = self._adjustment(plan.question_type, a.base)
            if window is not None and _said_within(a.base, window):
                boost *= preset.said_boost
            a.score *= boost
            a.head *= boost
        ranked = [(i, acc[i]) for _, i in sorted((-a.score, i) for i, a in acc.items())[:depth]]
        return RouteRanking(
            route_id=f"r{index}",
            candidates=[
                Candidate(
                    item_id=i,
                    node_ids=tuple(sorted(a.nodes)),
                    queries=tuple(sorted(a.queries)),
                    channel_scores={**a.channels, "route_rrf": a.score, HEAD_SCORE: a.head},
                    **(items.get(i) or items.setdefault(i, candidate_fields(a.base))),
                )
                for i, a in ranked
            ],
        )

    def _temporal(self, namespace: str, window: TemporalFilter) -> list[dict[str, Any]]:
        """Records linked to temporal nodes whose date falls inside the filter."""
        ids: list[str] = []
        for node in self.store.nodes.temporal(namespace):
            if window.overlaps(node["key"].split(":", 1)[1]):  # day:, month: or year: keys
                ids.extend(reversed(node.get("record_ids") or []))
        limit = max(10 * self.config.plan_depth, 100)
        return self.store.records.by_ids(namespace, list(dict.fromkeys(ids))[:limit])

    def _adjustment(self, qtype: QuestionType, row: dict[str, Any]) -> float:
        boost = self.config.type_boost
        if qtype is QuestionType.temporal and row.get("t_ref"):
            return boost
        if qtype is QuestionType.personalized_advice and row.get("memory_type") == "preference":
            return boost
        if qtype is QuestionType.prior_assistant_response and row.get("role") == "assistant":
            return boost
        return 1.0


def _credit_records(acc: dict[str, _Acc], share: float, head_share: float) -> None:
    """Each record plus `share` of the best score of a raw turn or window showing one of its
    turns. A record and the turn it came from are two items, each found by its own channels;
    what the turn's channels found is evidence for the record's statement as well. The
    window's neighbours count too: a reply's record is credited by its question's window.
    Turns are matched within a session: a caller's turn ids may repeat across sessions."""
    if not share and not head_share:
        return
    best: dict[tuple[str, str], tuple[float, float]] = {}
    records = []
    for a in acc.values():
        session, turns = turns_of(a.base)
        if is_record(a.base):
            records.append((a, session, turns))
            continue
        for t in turns:
            score, head = best.get((session, t), (0.0, 0.0))
            best[session, t] = (max(score, a.score), max(head, a.head))
    for a, session, turns in records if best else ():
        found = [best[k] for t in turns if (k := (session, t)) in best]
        if found:
            a.score += share * max(f[0] for f in found)
            a.head += head_share * max(f[1] for f in found)


def _reciprocal(kappa: int, n: int) -> list[float]:
    """`1 / (kappa + rank)` for ranks 1..n, the reciprocal-rank terms of a fusion."""
    return [1.0 / (kappa + rank) for rank in range(1, n + 1)]


def _said_within(row: dict[str, Any], window: TemporalFilter) -> bool:
    """Whether a record was said, or a turn's session held, on a day inside the window."""
    said = row.get("created_at") if is_record(row) else row.get("session_date")
    return isinstance(said, datetime) and _day_within(window, said.date())


@lru_cache(maxsize=4096)
def _day_within(window: TemporalFilter, day: date) -> bool:
    """Whether the day lies inside the window (a route's candidates share a few days)."""
    return window.overlaps(day.isoformat())


def _fts_text(queries: Sequence[str]) -> str:
    """The words of a route's query variants, each once, in order."""
    return " ".join(dict.fromkeys(w for q in queries for w in re.findall(r"\w+", q.lower())))
