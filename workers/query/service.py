"""The query service: plan-guided multi-route retrieval (DESIGN §8, paper Alg. 2).

One planning step (heuristic, or an LLM when configured) turns the question into routes;
recall per route runs over evidence nodes, records and raw turns, all prefiltered by
namespace; routes are fused by reciprocal rank, route coverage is kept and a
diversity-aware selection picks the evidence, serialized in the answer prompt's form.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import cast

from schemas import EvidenceItem, QueryReply, QueryRequest, Role
from schemas.plan import MAX_ROUTE_QUERIES, Plan, QuestionType
from schemas.query import Ablation
from schemas.records import NodeType, TokenUsage
from workers.embedding import Embedder
from workers.llm.usage import total_usage
from workers.query.adapter import QueryAdapter
from workers.query.answer import LLMAnswerer
from workers.query.bridge import READ, answer_name, bridges, with_name
from workers.query.errors import AnswerUnavailable
from workers.query.locality import Seqs, near_first
from workers.query.multiroute import MultiRouteRecall, RecallConfig
from workers.query.planner import HeuristicPlanner, Planner, single_route_plan
from workers.query.planner.wording import unique_queries
from workers.query.rerank import RERANK_CANDIDATES, Reranker, rerank_pool, rerank_route
from workers.query.scorer import LEAD, Scorer, lead
from workers.query.selection import (
    HEAD,
    POOL_FACTOR,
    Fused,
    FusedOrder,
    Reuse,
    RouteRanking,
    by_head,
    redundant_last,
    select,
    sort_only,
    with_head,
)
from workers.query.serialize import serialize_context
from workers.query.speakers import Turn, aside_for
from workers.query.timing import Stopwatch
from workers.store import EvidenceStore, consistent_reads

LED_POOL = 30  # selection's choice the second stage leads, of which the first k are kept

# "no-entity-topic-nodes" leaves the entity_topic nodes out of recall, and so on
NODE_ABLATIONS: dict[Ablation, frozenset[NodeType]] = {
    cast(Ablation, f"no-{t.value.replace('_', '-')}-nodes"): frozenset({t}) for t in NodeType
}


@dataclass(frozen=True)
class QueryDeps:
    """Everything the query stage uses from outside, built once by its app (STYLE 3)."""

    store: EvidenceStore
    embedder: Embedder
    planner: Planner = field(default_factory=HeuristicPlanner)
    answerer: LLMAnswerer | None = None
    reranker: Reranker | None = None
    # the second stage where no cross-encoder reranks (None: off; the fitted one is
    # `workers.query.scorer.FITTED`, chosen by LYCHEE_QUERY_SCORER), led by `scorer.LEAD`
    scorer: Scorer | None = None
    # question vectors moved toward the statements that answer them (None: the model's own;
    # the fitted one is `workers/query/adapter.npz`, chosen by LYCHEE_QUERY_ADAPTER)
    adapter: QueryAdapter | None = None


class QueryService:
    """Plan, recall per route, fuse, select, serialize (paper Alg. 2)."""

    def __init__(
        self,
        deps: QueryDeps,
        config: RecallConfig | None = None,
        rerank_candidates: int = RERANK_CANDIDATES,
        ablation: Ablation | None = None,
    ) -> None:
        self.planner = deps.planner
        self.answerer = deps.answerer
        self.reranker = deps.reranker
        self.scorer = deps.scorer if deps.reranker is None else None
        self.rerank_candidates = rerank_candidates
        self.ablation = ablation  # applied to requests that name none
        self.recall = MultiRouteRecall(deps.store, deps.embedder, config, deps.adapter)

    async def search(self, req: QueryRequest) -> QueryReply:
        with consistent_reads():  # one version check per table a request
            return await self._search(req)

    async def _search(self, req: QueryRequest) -> QueryReply:
        watch = Stopwatch()
        t = time.perf_counter()
        ablation = req.ablation or self.ablation
        if ablation == "no-planner":
            plan, usage = single_route_plan(req.query), TokenUsage()
        else:
            plan, usage = await self.planner.plan(req.query)
        t = watch.lap("plan", t)
        rerank = self.reranker is not None and ablation != "no-fusion"
        pool = rerank_pool(self.recall.effective_k(req.k), self.rerank_candidates) if rerank else 0
        second = None if ablation == "no-fusion" else self.scorer
        picked = req.k if second is None else max(req.k, LED_POOL)  # what selection picks
        recall = partial(
            self.recall.recall,
            namespace=req.namespace,
            k=req.k,
            session_id=req.session_id,
            record_vector_only=ablation == "record-vector-only",
            skip_nodes=NODE_ABLATIONS.get(ablation, frozenset()) if ablation else frozenset(),
            timings=watch.timings,
        )
        # selection reads the top POOL_FACTOR·k, after any rerank of the top `pool`; the
        # no-fusion ablation sorts every candidate by its raw scores
        depth = None if ablation == "no-fusion" else max(POOL_FACTOR * picked, pool)
        routes = await recall(plan, req.query, depth=depth)
        t = watch.lap("recall", t)
        if ablation is None:
            plan, routes = await _bridged(req.query, plan, routes, recall)
            t = watch.lap("bridge", t)
        if rerank:
            routes = await asyncio.to_thread(self._rerank, routes, req.query, pool)
            t = watch.lap("rerank", t)
        # CPU-bound (greedy diversity, tokenizer): kept off the loop other requests share
        when = plan.question_type is QuestionType.temporal
        evidence, context, tokens = await asyncio.to_thread(
            _selected,
            routes,
            req.k,
            ablation == "no-fusion",
            _Second(second, req.query, when),
            picked,
            0 if rerank else HEAD,  # a cross-encoder's order is not re-fused
            _Turns(self.recall.store, req.namespace, near=not rerank),
            [r.speaker for r in plan.routes],
        )
        t = watch.lap("selection", t)
        answer = None
        if req.answer:
            answer, answer_usage = await self._answer(req.query, context)
            usage = total_usage([usage, answer_usage])
            watch.lap("answer", t)
        return QueryReply(
            correlation_id=req.correlation_id,
            namespace=req.namespace,
            status="ok",
            query=req.query,
            evidence=evidence,
            context=context,
            context_tokens=tokens,
            plan=plan.model_dump(mode="json"),
            answer=answer,
            usage={
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "calls": usage.calls,
            },
            timings_ms=watch.total(),
            served_at=datetime.now(UTC),
        )

    def _rerank(self, routes: list[RouteRanking], question: str, pool: int) -> list[RouteRanking]:
        """Each route's head scored against the question: routes narrow where to look, the
        question says what counts as relevant."""
        assert self.reranker is not None
        return [rerank_route(r, question, self.reranker, pool) for r in routes]

    async def _answer(self, question: str, context: str) -> tuple[str, TokenUsage]:
        """A short answer under the paper's answer rules, or a plain note why there is none."""
        if self.answerer is None:
            return "no answer model is configured", TokenUsage()
        try:
            return await self.answerer.answer(question, context)
        except AnswerUnavailable as exc:
            return f"no answer: {exc.reason}", exc.usage


async def _bridged(
    question: str,
    plan: Plan,
    routes: list[RouteRanking],
    recall: Callable[..., Awaitable[list[RouteRanking]]],
) -> tuple[Plan, list[RouteRanking]]:
    """A later part of a coordinated question that refers back ("who fed it") searched again
    with the name the earlier part's best items give (`workers.query.bridge`), without those
    items (the earlier route keeps them); the plan in the reply shows the part as searched."""
    planned, ranked = list(plan.routes), list(routes)
    for earlier, later in bridges(question, planned):
        best = by_head(ranked[earlier].candidates)[:READ]
        name = answer_name(planned[earlier].queries[0], [c.text for c in best])
        if name is None:
            continue
        searched = [with_name(q, name) for q in planned[later].queries]
        route = planned[later].model_copy(
            update={"queries": unique_queries(searched, MAX_ROUTE_QUERIES)}
        )
        # every candidate kept, as for any route of several (its agreement counts)
        alone = plan.model_copy(update={"routes": [route]})
        (ranking,) = await recall(alone, route.queries[0], depth=None)
        read = {c.item_id for c in best}
        kept = [c for c in ranking.candidates if c.item_id not in read]
        planned[later], ranked[later] = route, RouteRanking(ranked[later].route_id, kept)
    return plan.model_copy(update={"routes": planned}), ranked


@dataclass(frozen=True)
class _Second:
    """The second stage of one request: the scorer (None: off) and what it reads; whether
    the question asks "when" also tells selection to keep dated records (`_Fresh`)."""

    scorer: Scorer | None
    question: str
    temporal: bool


def _selected(
    routes: list[RouteRanking],
    k: int,
    no_fusion: bool,
    second: _Second,
    picked: int,
    head: int,
    turns: _Turns,
    route_speakers: Sequence[str | None],
) -> tuple[list[EvidenceItem], str, int]:
    """Fusion, selection of `picked` items behind their head (or the no-fusion cut), the
    other speaker's items demoted when the question is about a person, the second stage's
    lead, items that show nothing new last, items near the first ones up (`turns.near`),
    the first k, then the evidence and its context."""
    reuse = Reuse()  # the head fuses and selects mostly the same items again
    fused = FusedOrder(routes, reuse=reuse)
    if no_fusion:
        chosen = sort_only(fused, k)
    else:
        when = second.temporal
        aside = aside_for(route_speakers, turns.said_by)
        chosen = select(fused, picked, len(routes), dated=when, reuse=reuse, demote=aside)
        chosen = with_head(routes, chosen, picked, head, dated=when, reuse=reuse, demote=aside)
        if second.scorer is not None:  # its few most likely items of that choice lead
            chosen = lead(chosen, second.question, second.temporal, second.scorer, LEAD)
        chosen = redundant_last(chosen, dated=when)
        if turns.near:
            seqs = turns.seqs(chosen[:LED_POOL])  # all that near_first reads
            chosen = redundant_last(near_first(chosen, seqs, LED_POOL), dated=when)
        chosen = chosen[:k]
    evidence = [_evidence(f) for f in chosen]
    context, tokens = serialize_context(evidence)
    return evidence, context, tokens


@dataclass(frozen=True)
class _Turns:
    """The request's namespace in the turns table: where turns sit and who said them.
    `near`: whether items near the first ones move up (not after a cross-encoder)."""

    store: EvidenceStore
    namespace: str
    near: bool

    def seqs(self, chosen: Sequence[Fused]) -> Seqs:
        """Where the turns of `chosen` sit in their sessions, for `near_first`."""
        turns = {(f.candidate.session_id, t) for f in chosen for t in f.candidate.turn_ids}
        return self.store.turns.seqs(self.namespace, turns)

    def said_by(self, turns: Iterable[Turn]) -> dict[Turn, str]:
        return self.store.turns.speakers(self.namespace, turns)


def _evidence(f: Fused) -> EvidenceItem:
    c = f.candidate
    if c.kind == "record":
        return EvidenceItem(
            kind="record",
            item_id=c.item_id,
            text=c.text,
            turn_ids=list(c.turn_ids),
            session_id=c.session_id,
            role=Role(c.role) if c.role else None,
            date=_day(c.mentioned),
            resolved_date=c.date,
            memory_type=c.memory_type,
            context=c.context,
            routes=list(f.routes),
            scores=f.scores(),
        )
    return EvidenceItem(
        kind=c.kind,
        item_id=c.item_id,
        text=c.text,
        turn_ids=list(c.turn_ids),
        session_id=c.session_id,
        speaker=c.speaker,
        role=Role(c.role) if c.role else None,
        date=_day(c.date),
        routes=list(f.routes),
        scores=f.scores(),
    )


def _day(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None
