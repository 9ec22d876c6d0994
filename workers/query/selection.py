"""Fusion and selection of multi-route candidates (DESIGN §8.4, paper §3.5 and App. C.4).

Pure arithmetic over already-recalled candidates: reciprocal-rank fusion across routes, the
final score `0.82·best + 0.18·route`, route coverage first, then an MMR-style greedy pick
`λ·relevance − (1 − λ)·similarity` over a pool larger than k, so diversity can change which
items are kept, not only their order. λ, the pool and the head are the query preset's
(`workers.query.presets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, overload

import numpy as np

from workers.query.likeness import Likeness
from workers.query.presets import SERVED

RRF_KAPPA = 60
# a candidate's within-route fusion with the preset's `head_kappa`: the order the first
# items of a selection (the head, `with_head`) are chosen by
HEAD_SCORE = "route_head"


def rrf(rankings: Sequence[Sequence[str]], kappa: int = RRF_KAPPA) -> dict[str, float]:
    """Reciprocal-rank fusion: `sum over lists of 1 / (kappa + rank)`, ranks from 1."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (kappa + rank)
    return scores


CandidateKind = Literal["record", "turn", "window"]

BEST_WEIGHT = 0.82
ROUTE_WEIGHT = 0.18
REDUNDANT = 2.0  # more than any gain: an item whose turns are all shown already comes last


@dataclass(frozen=True)
class Candidate:
    """One recalled item (record, raw turn or turn window) with its provenance and scores."""

    item_id: str
    kind: CandidateKind
    text: str
    session_id: str
    turn_ids: tuple[str, ...]
    entities: tuple[str, ...] = ()
    node_ids: tuple[str, ...] = ()  # evidence nodes it was reached through
    queries: tuple[str, ...] = ()  # query variants that matched it
    channel_scores: Mapping[str, float] = field(default_factory=dict)
    date: str | None = None  # a record's resolved date, a turn's conversation date (ISO)
    speaker: str | None = None
    role: str | None = None
    memory_type: str | None = None
    mentioned: str | None = None  # conversation date of a record's source (ISO)
    context: str | None = None  # a record's context (schemas.records.MemoryRecord.context)
    span: tuple[int, int] | None = None  # a long turn's passage: where it is in the turn
    span_turn_id: str | None = None  # the turn `span` is in


Demote = Callable[[Sequence[Candidate]], np.ndarray]


@dataclass(frozen=True)
class RouteRanking:
    """One route's recall (and optional rerank) output, best first."""

    route_id: str
    candidates: Sequence[Candidate]


def final_score(best: float, route: float) -> float:
    """`0.82·best + 0.18·route` (App. C.4)."""
    return BEST_WEIGHT * best + ROUTE_WEIGHT * route


@dataclass(frozen=True)
class Fused:
    """A candidate after cross-route fusion.

    `best` is the max over routes of `(kappa + 1) / (kappa + rank)`: the RRF term of its best
    rank, scaled so a route's top item is 1.0. `route_score` is the fraction of routes that
    retrieved it: rank is already in `best`, so the route term rewards cross-route agreement
    only (a normalized RRF would count rank twice). With one route it is 1.0 for every item.
    """

    candidate: Candidate
    rrf: float
    best: float
    route_score: float
    routes: tuple[str, ...]
    second: float | None = None  # the second stage's probability (workers.query.scorer.lead)

    @property
    def item_id(self) -> str:
        return self.candidate.item_id

    @property
    def fused(self) -> float:
        """`0.82·best + 0.18·route`: the fusion's own score."""
        return final_score(self.best, self.route_score)

    def scores(self) -> dict[str, float]:
        """Channel scores plus the fusion scores, e.g. for `EvidenceItem.scores`."""
        fusion = dict(rrf=self.rrf, best=self.best, route=self.route_score, final=self.fused)
        if self.second is not None:
            fusion["second"] = self.second
        return {**self.candidate.channel_scores, **{n: round(v, 6) for n, v in fusion.items()}}


def _union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    if all(g == groups[0] for g in groups[1:]):  # one item through several routes, mostly
        return groups[0]
    return tuple(dict.fromkeys(x for g in groups for x in g))


def _merge(first: Candidate, *more: Candidate) -> Candidate:
    """`first` (seen first) keeps its text and fields; provenance is unioned, channels maxed."""
    if not more:
        return first
    every = (first, *more)
    scores = dict(first.channel_scores)
    for c in more:
        for name, value in c.channel_scores.items():
            scores[name] = max(value, scores.get(name, value))
    return replace(
        first,
        turn_ids=_union(*(c.turn_ids for c in every)),
        entities=_union(*(c.entities for c in every)),
        node_ids=_union(*(c.node_ids for c in every)),
        queries=_union(*(c.queries for c in every)),
        channel_scores=scores,
        date=next((c.date for c in every if c.date), more[-1].date),
    )


class FusedOrder(Sequence[Fused]):
    """Routes fused with `sum 1/(kappa + rank)`, best final score first, ties by item_id; an
    item's `Fused` (and its merge) is built when first read.

    A repeated item within one route counts once, at its best rank. Empty routes still count
    in the denominator of `route_score`. `reuse`: the request's items merged already. With
    several routes recall keeps every candidate (about a thousand a route at k = 100), and
    selection reads the first `pool_factor`·k and each route's first few: building every item,
    twice a request, would be most of such a request's selection.
    """

    def __init__(
        self, routes: Sequence[RouteRanking], kappa: int = RRF_KAPPA, reuse: Reuse | None = None
    ) -> None:
        found: dict[str, list[Candidate]] = {}
        seen_in: dict[str, list[str]] = {}
        best_rank: dict[str, int] = {}
        rankings: list[dict[str, None]] = []
        for route in routes:
            ranking: dict[str, None] = {}
            for cand in route.candidates:
                cid = cand.item_id
                found.setdefault(cid, []).append(cand)
                if cid not in ranking:
                    ranking[cid] = None
                    seen_in.setdefault(cid, []).append(route.route_id)
                    best_rank[cid] = min(len(ranking), best_rank.get(cid, len(ranking)))
            rankings.append(ranking)
        scores = rrf([list(r) for r in rankings], kappa)
        self._reuse = reuse or Reuse()
        self._found, self._seen_in = found, seen_in
        self._fusion: dict[str, tuple[float, float, float]] = {}  # rrf, best, route_score
        keys = []
        for cid in found:
            best = (kappa + 1) / (kappa + best_rank[cid])
            share = len(seen_in[cid]) / len(routes)
            self._fusion[cid] = (scores[cid], best, share)
            keys.append(_order_key(final_score(best, share), scores[cid], cid))
        self._order = [cid for *_, cid in sorted(keys)]
        self._built: list[Fused] = []

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> Fused: ...
    @overload
    def __getitem__(self, index: slice) -> list[Fused]: ...
    def __getitem__(self, index: int | slice) -> Fused | list[Fused]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        while len(self._built) <= index:
            self._built.append(self._build(self._order[len(self._built)]))
        return self._built[index]

    def __iter__(self) -> Iterator[Fused]:
        for i in range(len(self)):
            yield self[i]

    def _build(self, cid: str) -> Fused:
        rrf_score, best, share = self._fusion[cid]
        return Fused(
            candidate=self._reuse.merge(cid, self._found[cid]),
            rrf=rrf_score,
            best=best,
            route_score=share,
            routes=tuple(self._seen_in[cid]),
        )


def _order_key(final: float, rrf_score: float, item_id: str) -> tuple[float, float, str]:
    """Best final score first, then the higher reciprocal-rank sum, then the smaller id."""
    return (-final, -rrf_score, item_id)


def _rank_key(f: Fused) -> tuple[float, float, str]:
    return _order_key(f.fused, f.rrf, f.item_id)


def route_quota(k: int, routes: int) -> int:
    """Items each route is guaranteed first: `max(1, min(4, k // routes))`."""
    if routes < 1:
        raise ValueError(f"routes must be >= 1, got {routes}")
    return max(1, min(4, k // routes))


class Reuse:
    """One request's items merged and compared once, for its two fusions and selections.

    The head (`with_head`) fuses the same routes' candidates in another order and selects
    from nearly the same pool (at k = 100 the same 300 items); merging and the pairwise
    similarity are most of selection's time, so each is done once. An item id names one
    item, and either order merges the same candidates of it into the same sets.
    """

    def __init__(self) -> None:
        self._merged: dict[str, Candidate] = {}
        self._likeness = Likeness()

    def merge(self, item_id: str, candidates: Sequence[Candidate]) -> Candidate:
        """`_merge(*candidates)`, an item merged before not merged again."""
        merged = self._merged.get(item_id)
        if merged is None:
            merged = self._merged[item_id] = _merge(*candidates)
        return merged

    def similarity(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """`likeness.signature_similarity` of every pair of `candidates`, bit for bit the same;
        pairs seen before are not computed again."""
        return self._likeness.of(candidates)


def _coverage(fused: Sequence[Fused], k: int, n_routes: int) -> list[Fused]:
    """Each route's best items up to its quota, skipping one whose turns are all shown."""
    quota = route_quota(k, n_routes)
    order: dict[str, None] = {}  # the routes in the order of their best item
    for f in fused:
        order.update(dict.fromkeys(f.routes))
        if len(order) == n_routes:
            break  # the rest of a FusedOrder stays unbuilt
    chosen: dict[str, Fused] = {}
    shown: set[str] = set()
    for route in order:
        added = 0
        for f in fused:
            if len(chosen) >= k or added >= quota:
                break
            turns = set(f.candidate.turn_ids)
            if route in f.routes and f.item_id not in chosen and not (turns and turns <= shown):
                chosen[f.item_id] = f
                shown |= turns
                added += 1
    return list(chosen.values())


def select(
    fused: Sequence[Fused],
    k: int,
    n_routes: int,
    pool_factor: int = SERVED.pool_factor,
    lam: float = SERVED.diversity_lambda,
    redundant: float = REDUNDANT,
    dated: bool = False,
    reuse: Reuse | None = None,
    first: int | None = None,
    demote: Demote | None = None,
) -> list[Fused]:
    """Route coverage first, then MMR-style greedy to k items, returned in selection order.

    Coverage: each route (ordered by its best item in `fused`) adds up to
    `route_quota(k, n_routes)` of its unselected items by final score, never past k. Skipped
    with one route, where it would only lock the top items before diversity could act.
    The greedy step runs over the top `pool_factor * k` by final score and picks
    `argmax lam·relevance − (1 − lam)·max_similarity_to_selected`, relevance being the final
    score min-max normalized over the pool (all 1.0 if flat); ties go to the smaller item_id.
    An item whose turns the chosen items all show already loses `redundant` (`_Fresh`);
    for a `dated` question (when ...?), not a record that states a date none of them shows.
    `first`: stop once that many are chosen, the first items of the whole selection of k;
    coverage then shares those `first` among the routes (`route_quota(first, n_routes)`),
    so a reply's first items do not depend on how many follow them.
    `demote`: what each pool item's relevance loses (`workers.query.speakers.Aside`).
    """
    if pool_factor < 2:
        raise ValueError("pool_factor must be >= 2 so diversity can change the kept set")
    ranked = fused if isinstance(fused, FusedOrder) else sorted(fused, key=_rank_key)
    stop = k if first is None else min(k, first)
    chosen = _coverage(ranked, stop, n_routes) if n_routes > 1 else []
    taken = {f.item_id for f in chosen}
    top = ranked[: pool_factor * k]
    pool = [f for f in top if f.item_id not in taken]
    if not pool:
        return chosen
    hi, lo = top[0].fused, top[-1].fused
    pool.sort(key=lambda f: f.item_id)  # argmax keeps the first of equal gains: smallest id
    relevance = np.array([(f.fused - lo) / (hi - lo) if hi > lo else 1.0 for f in pool])
    if demote is not None:
        relevance = relevance - demote([f.candidate for f in pool])
    sim = (reuse or Reuse()).similarity([f.candidate for f in [*chosen, *pool]])[len(chosen) :]
    max_sim = sim[:, : len(chosen)].max(axis=1, initial=0.0)  # to the selected set
    sim = sim[:, len(chosen) :]
    left = np.ones(len(pool), dtype=bool)
    fresh = _Fresh(pool, chosen, dated)
    while len(chosen) < stop and left.any():
        gain = np.where(left, lam * relevance - (1 - lam) * max_sim, -np.inf)
        gain = np.where(fresh.fresh(), gain, gain - redundant)
        pick = int(np.argmax(gain))
        chosen.append(pool[pick])
        left[pick] = False
        fresh.cover(pool[pick])
        max_sim = np.maximum(max_sim, sim[:, pick])
    return chosen


def by_head(candidates: Sequence[Candidate]) -> list[Candidate]:
    """A route's candidates in the order of its head's fusion (`HEAD_SCORE`)."""
    return sorted(candidates, key=lambda c: -c.channel_scores.get(HEAD_SCORE, 0.0))


def with_head(
    routes: Sequence[RouteRanking],
    chosen: Sequence[Fused],
    k: int,
    head: int,
    dated: bool = False,
    reuse: Reuse | None = None,
    demote: Demote | None = None,
    pool_factor: int = SERVED.pool_factor,
    lam: float = SERVED.diversity_lambda,
) -> list[Fused]:
    """`chosen` (selection over the usual fusion) behind a head: the first `head` items of
    the same selection (`pool_factor`, `lam`) over each route re-ordered by its HEAD_SCORE.
    An item of the head keeps its place there and leaves the rest; k items in all."""
    if head <= 0 or not chosen:
        return list(chosen[:k])
    sharp = [RouteRanking(r.route_id, by_head(r.candidates)) for r in routes]
    # the first items of a full selection: one of `head` items alone reads a smaller pool,
    # which recalls less on open-domain questions
    fused = FusedOrder(sharp, reuse=reuse)
    top = select(
        fused,
        k,
        len(routes),
        pool_factor,
        lam,
        dated=dated,
        reuse=reuse,
        first=head,
        demote=demote,
    )
    top = top[: min(head, k)]
    ids = {f.item_id for f in top}
    return [*top, *(f for f in chosen if f.item_id not in ids)][:k]


def redundant_last(chosen: Sequence[Fused], dated: bool = False) -> list[Fused]:
    """`chosen` with each item whose turns the items before it all show moved to the end,
    both groups in their order: after the head and the second stage's lead reorder
    selection's choice, the rule selection follows (`REDUNDANT`, `_Fresh`) holds again."""
    fresh = _Fresh(chosen, [], dated)
    early: list[Fused] = []
    late: list[Fused] = []
    for i, f in enumerate(chosen):
        (early if fresh.is_fresh(i) else late).append(f)
        fresh.cover(f)
    return [*early, *late]


def states_date(c: Candidate) -> bool:
    """A record whose statement is dated in its own words ("It's on Sunday, June 2nd"): its
    date is not the day it was said."""
    return c.kind == "record" and c.date is not None and c.date != (c.mentioned or "")[:10]


class _Fresh:
    """Whether each pool item adds to what the chosen items already show.

    An item whose every turn is covered (a record of a turn whose window is chosen) says
    nothing the reader has not got: it waits until every item that adds a turn is taken.
    For a `dated` question a record that states a date adds it while no chosen item of its
    turns shows one (a turn window shows the whole turn): "When is the race?" wants "It's
    on Sunday, June 2nd" beside "Ana signed up for the race", a record of the same turn.
    """

    def __init__(self, pool: Sequence[Fused], chosen: Sequence[Fused], dated: bool) -> None:
        self.holders: dict[str, list[int]] = {}
        for i, f in enumerate(pool):
            for t in set(f.candidate.turn_ids):
                self.holders.setdefault(t, []).append(i)
        self.news = np.asarray([len(set(f.candidate.turn_ids)) for f in pool], dtype=np.int64)
        self.date_news = np.asarray([dated and states_date(f.candidate) for f in pool])
        self.covered: set[str] = set()
        self.dated: set[str] = set()  # turns a chosen item shows the date of
        for f in chosen:
            self.cover(f)

    def fresh(self) -> np.ndarray:
        return np.asarray((self.news > 0) | self.date_news)

    def is_fresh(self, i: int) -> bool:
        return bool(self.news[i] > 0 or self.date_news[i])

    def cover(self, f: Fused) -> None:
        turns = set(f.candidate.turn_ids)
        for t in turns - self.covered:
            self.covered.add(t)
            for i in self.holders.get(t, ()):
                self.news[i] -= 1
        if f.candidate.kind != "record" or states_date(f.candidate):
            for t in turns - self.dated:
                self.dated.add(t)
                for i in self.holders.get(t, ()):
                    self.date_news[i] = False


def sort_only(fused: Sequence[Fused], k: int) -> list[Fused]:
    """Ablation without fusion, rerank or diversity.

    Key: `(-max(channel_scores.values(), default=0.0), item_id)`, cut at k. Raw channel
    scores are compared as they are, across channels of different scales.
    """

    def key(f: Fused) -> tuple[float, str]:
        return (-max(f.candidate.channel_scores.values(), default=0.0), f.item_id)

    return sorted(fused, key=key)[:k]
