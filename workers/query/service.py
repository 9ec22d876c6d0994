"""The query service: plan-guided multi-route retrieval (DESIGN §8, paper Alg. 2).

One planning step (heuristic, or an LLM when configured) turns the question into routes;
recall per route runs over evidence nodes, records and raw turns, all prefiltered by
namespace; routes are fused by reciprocal rank, route coverage is kept and a
diversity-aware selection picks the evidence, serialized in the answer prompt's form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import numpy as np
import structlog

from schemas import EvidenceItem, QueryReply, QueryRequest, Role
from schemas.plan import Plan, QuestionType
from schemas.records import TokenUsage
from workers import telemetry
from workers.embedding import Embedder, embed_queries
from workers.errors import PRUNED_READ_ATTEMPTS, read_pruned
from workers.llm.usage import total_usage
from workers.query.adapter import QueryAdapter
from workers.query.answer import LLMAnswerer
from workers.query.bridge import bridged
from workers.query.currency import current_first, current_within
from workers.query.dated import dated_siblings
from workers.query.distinct import without_common
from workers.query.echoed import echoes_last
from workers.query.errors import AnswerUnavailable
from workers.query.instructions import Scoped, StandingInstructions, with_instruction
from workers.query.locality import Seqs, near_first
from workers.query.multiroute import MultiRouteRecall, RecallConfig
from workers.query.planner import HeuristicPlanner, Planner, single_route_plan
from workers.query.planner.wording import about_the_history
from workers.query.presets import ABLATIONS, SERVED, QueryPreset
from workers.query.rerank import RERANK_CANDIDATES, Reranker, rerank_pool, rerank_route
from workers.query.scorer import Scorer, lead
from workers.query.selection import (
    Candidate,
    Fused,
    FusedOrder,
    Reuse,
    RouteRanking,
    redundant_last,
    select,
    sort_only,
    with_head,
)
from workers.query.serialize import items_that_fit, serialize_context
from workers.query.shown import turns_over_records
from workers.query.speakers import Turn, aside_for, user_aside
from workers.query.timing import Stopwatch
from workers.store import EvidenceStore, consistent_reads
from workers.store.snapshots import Written
from workers.tokens import encoding

log = structlog.get_logger("lychee.query")


@dataclass(frozen=True)
class QueryDeps:
    """Everything the query stage uses from outside, built once by its app (STYLE 3)."""

    store: EvidenceStore
    embedder: Embedder
    planner: Planner = field(default_factory=HeuristicPlanner)
    answerer: LLMAnswerer | None = None
    reranker: Reranker | None = None
    # the second stage where no cross-encoder reranks (None: off; a fitted file is named by
    # LYCHEE_QUERY_SCORER), led as the preset says
    scorer: Scorer | None = None
    # question vectors moved toward the statements that answer them (None: the model's own;
    # a fitted file is named by LYCHEE_QUERY_ADAPTER)
    adapter: QueryAdapter | None = None
    # where a namespace's searched tables were last written (streams.written), read once a
    # request: its snapshots then outlive the writes to other namespaces (None: not known)
    written: Callable[[str], Awaitable[Written | None]] | None = None


class QueryService:
    """Plan, recall per route, fuse, select, serialize (paper Alg. 2).

    Each request runs as one query preset says (`workers.query.presets`): the one its
    `ablation` names, else `preset`, the service's default."""

    def __init__(
        self,
        deps: QueryDeps,
        config: RecallConfig | None = None,
        rerank_candidates: int = RERANK_CANDIDATES,
        preset: QueryPreset = SERVED,
    ) -> None:
        self.planner = deps.planner
        self.turns = deps.store.turns
        self.answerer = deps.answerer
        self.reranker = deps.reranker
        self.scorer = deps.scorer if deps.reranker is None else None
        self.rerank_candidates = rerank_candidates
        self.preset = preset  # applied to requests that name no ablation
        self.recall = MultiRouteRecall(deps.store, deps.embedder, config, deps.adapter)
        self.instructions = StandingInstructions(deps.store, deps.embedder)
        self.written = deps.written
        encoding()  # the token counter's tables load here, not in a first request (half a second)

    async def search(self, req: QueryRequest) -> QueryReply:
        """The reply to `req`; searched again at the tables' latest versions when another
        process's forget pruned the version a read was on (a few times: forgets are rare)."""
        for attempt in range(PRUNED_READ_ATTEMPTS):
            written = None if self.written is None else await self.written(req.namespace)
            try:
                with consistent_reads(written):  # one version check per table a request
                    return await self._search(req)
            except RuntimeError as exc:
                if not read_pruned(exc) or attempt == PRUNED_READ_ATTEMPTS - 1:
                    raise
                log.info("query.read_pruned", attempt=attempt + 1, error=str(exc)[:200])
                await asyncio.to_thread(self.recall.store.latest)
        raise AssertionError("unreachable")  # pragma: no cover

    def _warming(self, namespace: str, preset: QueryPreset) -> asyncio.Future[list[Scoped | None]]:
        """The namespace's standing instructions read and their scopes embedded (its first
        item, None when off or none), and its snapshots and full-text indexes loading, the
        three tables at once, beside the plan and the question's embedding: after a write, a
        request's searches would otherwise load them one after the other, behind those two
        (`EvidenceStore.warmers`); none for the ablation that reads one table by vector."""
        tables = [] if preset.record_vector_only else self.recall.store.warmers(namespace)
        scopes = asyncio.to_thread(self._scoped, namespace, preset.instruction_cosine)
        warming: asyncio.Future[list[Scoped | None]] = asyncio.ensure_future(
            asyncio.gather(scopes, *map(asyncio.to_thread, tables))
        )
        # a request that fails before awaiting it leaves no unretrieved error behind
        warming.add_done_callback(lambda f: f.cancelled() or f.exception())
        return warming

    async def _search(self, req: QueryRequest) -> QueryReply:
        watch = Stopwatch()
        preset = self.preset if req.ablation is None else ABLATIONS[req.ablation]
        warming = self._warming(req.namespace, preset)
        about_history = about_the_history(req.query)
        with watch.stage("plan") as span:
            plan, usage = await self._plan(req, preset)
            if about_history and preset.common_share:
                shares = partial(self.recall.store.turns.shares, req.namespace)
                plan = await asyncio.to_thread(without_common, plan, shares, preset.common_share)
            telemetry.set_attributes(span, plan_attributes(plan))
        rerank = self.reranker is not None and preset.rerank
        pool = rerank_pool(self.recall.effective_k(req.k), self.rerank_candidates) if rerank else 0
        second = self.scorer if preset.second_stage else None
        history = preset.history_by_session and about_history
        # items near the first ones move up, but not past a cross-encoder's order, nor in a
        # history question, where the first items' neighbours would crowd out other sessions
        near = not (rerank or history)
        # a history question needs every session's best: it reads the led pool and recall
        # searches as deep for it, however few items are asked for
        picked = selection_size(req.k, preset.led_pool, second is not None or near or history)
        recall = partial(
            self.recall.recall,
            namespace=req.namespace,
            k=picked if history else req.k,
            session_id=req.session_id,
            preset=preset,
            timings=watch.timings,
        )
        # selection reads the top pool_factor·k, after any rerank of the top `pool`; without
        # fusion every candidate is sorted by its raw scores
        depth = max(preset.pool_factor * picked, pool) if preset.fusion else None
        with watch.stage("recall") as span:
            routes = await recall(plan, req.query, depth=depth)
            scoped, *_ = await warming  # done by now: the searches read what it loads
            telemetry.set_attributes(span, recall_attributes(watch.timings, routes))
        if preset.bridge:
            with watch.stage("bridge"):
                plan, routes = await bridged(req.query, plan, routes, recall)
        if history:
            routes = by_session(routes)
        if rerank:
            with watch.stage("rerank"):
                routes = await asyncio.to_thread(self._rerank, routes, req.query, pool)
        # CPU-bound (greedy diversity, tokenizer): kept off the loop other requests share
        when = plan.question_type is QuestionType.temporal
        prior = plan.question_type is QuestionType.prior_assistant_response
        with watch.stage("selection") as span:
            evidence, context, tokens = await asyncio.to_thread(
                _selected,
                routes,
                req.k,
                preset,
                _Second(second, req.query, when, prior),
                picked,
                0 if rerank else preset.head,  # a cross-encoder's order is not re-fused
                _Turns(self.recall.store, req.namespace, near=near, shown=not rerank),
                [r.speaker for r in plan.routes],
                partial(self._instruction, scoped, req.query, preset.instruction_cosine),
            )
            evidence, context, tokens = await asyncio.to_thread(
                self._current, req, evidence, context, tokens
            )
            telemetry.set_attributes(span, {"lychee.query.evidence": len(evidence)})
        answered = Answered()
        if req.answer:
            with watch.stage("answer"):
                answered = await self._answer(req.query, evidence, context)
            usage = total_usage([usage, answered.usage])
        return _reply(req, plan, (evidence, context, tokens), answered, usage, watch.total())

    def _current(
        self, req: QueryRequest, evidence: list[EvidenceItem], context: str, tokens: int
    ) -> tuple[list[EvidenceItem], str, int]:
        """Today's truth first, the older value kept and marked, conflicts side by side; then
        the request's token budget, which keeps what replaced a statement it keeps."""
        store, ns, question = self.recall.store, req.namespace, req.query
        linked = current_first(store, ns, question, evidence, self._alike)
        evidence, context, tokens = linked or (evidence, context, tokens)
        if req.token_budget is None or tokens <= req.token_budget:
            return evidence, context, tokens
        return current_within(store, ns, question, evidence, req.token_budget, self._alike)

    async def _plan(self, req: QueryRequest, preset: QueryPreset) -> tuple[Plan, TokenUsage]:
        """The planner's plan, told the namespace's speakers; one route of the question
        itself when the preset plans nothing."""
        if not preset.planner:
            return single_route_plan(req.query), TokenUsage()
        speakers = await asyncio.to_thread(self.turns.names, req.namespace)
        return await self.planner.plan(req.query, speakers)

    def _scoped(self, namespace: str, at_least: float) -> Scoped | None:
        """The namespace's standing instructions (0: off)."""
        return self.instructions.of(namespace) if at_least else None

    def _alike(self, text: str, others: Sequence[str]) -> list[float]:
        """The cosine of `text` to each of `others`, by the model that embeds the store."""
        vecs = np.asarray(embed_queries(self.recall.embedder, [text, *others]))
        return [float(c) for c in vecs[1:] @ vecs[0]]

    def _instruction(self, scoped: Scoped | None, question: str, at_least: float) -> Fused | None:
        """The user's standing instruction the question falls under, if any."""
        return None if scoped is None else scoped.nearest(self.recall.vector(question), at_least)

    def _rerank(self, routes: list[RouteRanking], question: str, pool: int) -> list[RouteRanking]:
        """Each route's head scored against the question: routes narrow where to look, the
        question says what counts as relevant."""
        assert self.reranker is not None
        return [rerank_route(r, question, self.reranker, pool) for r in routes]

    async def _answer(self, question: str, evidence: list[EvidenceItem], context: str) -> Answered:
        """A short answer under the paper's answer rules from the leading evidence items
        that fit the model's context window (whole, in order: `items_that_fit`), or why
        there is none."""
        if self.answerer is None:
            return Answered(error="no answer model is configured")
        budget = await self.answerer.evidence_budget(question)
        n = len(evidence)
        if budget is not None:  # the tokenizer is CPU-bound: off the loop, as selection
            n = await asyncio.to_thread(items_that_fit, evidence, budget)
            if n < len(evidence):
                context = (await asyncio.to_thread(serialize_context, evidence[:n]))[0]
        try:
            text, usage = await self.answerer.answer(question, context)
        except AnswerUnavailable as exc:
            return Answered(error=exc.reason, items=n, usage=exc.usage)
        return Answered(text, items=n, usage=usage)


def selection_size(k: int, led_pool: int, read: bool) -> int:
    """How many items selection picks for a request of `k` (the reply keeps the first k):
    `led_pool` however few are asked for when the second stage's lead, the locality
    (`near_first`) or a history question's sessions `read` them."""
    return max(k, led_pool) if read else k


@dataclass(frozen=True)
class Answered:
    """What a request's answer came to: its text, or the reason there is none; how many
    evidence items (in the reply's order) it was given; what its call spent."""

    text: str | None = None
    error: str | None = None
    items: int | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)


MAX_SESSION_ROUTES = 8


def by_session(routes: list[RouteRanking]) -> list[RouteRanking]:
    """The candidates as one route per session, sessions in the order of their best
    candidate (at most `MAX_SESSION_ROUTES`): selection's route coverage then keeps each
    session's best items, which a question about the whole history needs from every one."""
    sessions: dict[str, list[Candidate]] = {}
    seen: set[str] = set()
    for route in routes:
        for c in route.candidates:
            if c.item_id not in seen:
                seen.add(c.item_id)
                sessions.setdefault(c.session_id, []).append(c)
    if len(sessions) < 2:
        return routes
    kept = list(sessions.items())[:MAX_SESSION_ROUTES]
    return [RouteRanking(f"session:{s}", found) for s, found in kept]


@dataclass(frozen=True)
class _Second:
    """The second stage of one request: the scorer (None: off) and what it reads; whether
    the question asks "when" also tells selection to keep dated records (`_Fresh`)."""

    scorer: Scorer | None
    question: str
    temporal: bool
    asks_assistant: bool = False  # what the assistant said earlier (prior_assistant_response)


def _selected(
    routes: list[RouteRanking],
    k: int,
    preset: QueryPreset,
    second: _Second,
    picked: int,
    head: int,
    turns: _Turns,
    route_speakers: Sequence[str | None],
    instruction: Callable[[], Fused | None],
) -> tuple[list[EvidenceItem], str, int]:
    """Fusion, selection of `picked` items behind their head (or, without fusion, the cut of
    the raw scores), the other speaker's items demoted when the question is about a person,
    the second stage's lead, items that show nothing new last, items near the first ones up
    (`turns.near`), a record's place to the turn or window below it that shows it
    (`turns.shown`), the user's standing instruction the question falls under among the
    first items, a turn that asks the question again last, the first k, then the evidence and
    its context."""
    reuse = Reuse()  # the head fuses and selects mostly the same items again
    with telemetry.span("query.fusion", attributes={"lychee.query.routes": len(routes)}):
        fused = FusedOrder(routes, reuse=reuse)
    if not preset.fusion:
        chosen = sort_only(fused, k)
    else:
        when, factor, lam = second.temporal, preset.pool_factor, preset.diversity_lambda
        aside = aside_for(route_speakers, turns.said_by, preset.aside) or user_aside(
            second.question, second.asks_assistant, turns.roles, preset.aside
        )
        n = len(routes)
        chosen = select(fused, picked, n, factor, lam, dated=when, reuse=reuse, demote=aside)
        chosen = with_head(
            routes,
            chosen,
            picked,
            head,
            dated=when,
            reuse=reuse,
            demote=aside,
            pool_factor=factor,
            lam=lam,
        )
        if second.scorer is not None:  # its few most likely items of that choice lead
            chosen = lead(chosen, second.question, second.temporal, second.scorer, preset.lead)
        chosen = redundant_last(chosen, dated=when)
        if turns.near:
            led = preset.led_pool
            seqs = turns.seqs(chosen[:led])  # all that near_first reads
            chosen = redundant_last(near_first(chosen, seqs, led, preset.near), dated=when)
        if turns.shown:
            chosen = turns_over_records(chosen, preset.led_pool, dated=when)
    if second.temporal and preset.fusion:  # a record that names the event, then its date
        chosen = dated_siblings(chosen, fused[: preset.pool_factor * picked], min(k, preset.head))
    if (standing := instruction()) is not None:
        chosen = with_instruction(chosen, standing, min(k, preset.head))
    chosen = echoes_last(chosen, second.question)[:k]
    evidence = [_evidence(f) for f in chosen]
    context, tokens = serialize_context(evidence)
    return evidence, context, tokens


@dataclass(frozen=True)
class _Turns:
    """The request's namespace in the turns table: where turns sit and who said them.
    `near`: whether items near the first ones move up; `shown`: whether a turn or window that
    shows a record takes its place (neither after a cross-encoder)."""

    store: EvidenceStore
    namespace: str
    near: bool
    shown: bool

    def seqs(self, chosen: Sequence[Fused]) -> Seqs:
        """Where the turns of `chosen` sit in their sessions, for `near_first`."""
        turns = {(f.candidate.session_id, t) for f in chosen for t in f.candidate.turn_ids}
        return self.store.turns.seqs(self.namespace, turns)

    def said_by(self, turns: Iterable[Turn]) -> dict[Turn, str]:
        return self.store.turns.speakers(self.namespace, turns)

    def roles(self, turns: Iterable[Turn]) -> dict[Turn, str]:
        return self.store.turns.roles(self.namespace, turns)


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
        span=c.span,
        span_turn_id=c.span_turn_id,
        routes=list(f.routes),
        scores=f.scores(),
    )


def plan_attributes(plan: Plan) -> dict[str, telemetry.AttributeValue]:
    return {
        "lychee.plan.question_type": plan.question_type.value,
        "lychee.plan.routes": len(plan.routes),
        "lychee.plan.queries": sum(len(r.queries) for r in plan.routes),
    }


def recall_attributes(
    timings: dict[str, float], routes: Sequence[RouteRanking]
) -> dict[str, telemetry.AttributeValue]:
    """The recall channels' time (ms, summed inside their threads) and the candidates."""
    attrs: dict[str, telemetry.AttributeValue] = {
        f"lychee.{name}_ms": ms for name, ms in timings.items() if name.startswith("recall.")
    }
    attrs["lychee.query.candidates"] = sum(len(r.candidates) for r in routes)
    return attrs


def _reply(
    req: QueryRequest,
    plan: Plan,
    found: tuple[list[EvidenceItem], str, int],
    answered: Answered,
    usage: TokenUsage,
    timings: dict[str, float],
) -> QueryReply:
    """The reply: `found` is the evidence, its context and the context's tokens."""
    evidence, context, tokens = found
    return QueryReply(
        correlation_id=req.correlation_id,
        namespace=req.namespace,
        status="ok",
        query=req.query,
        evidence=evidence,
        context=context,
        context_tokens=tokens,
        plan=plan.model_dump(mode="json"),
        answer=answered.text,
        answer_error=answered.error,
        answer_items=answered.items,
        usage={
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "calls": usage.calls,
        },
        timings_ms=timings,
        served_at=datetime.now(UTC),
    )


def _day(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None
