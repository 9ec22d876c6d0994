"""Cross-route fusion, scores, signatures and selection (pure, hand-computed)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from workers.query.likeness import signature_similarity
from workers.query.presets import SERVED
from workers.query.selection import (
    HEAD_SCORE,
    Candidate,
    CandidateKind,
    Fused,
    FusedOrder,
    Reuse,
    RouteRanking,
    final_score,
    redundant_last,
    route_quota,
    rrf,
    select,
    sort_only,
    with_head,
)


def cand(
    item_id: str,
    *,
    kind: CandidateKind = "record",
    text: str = "",
    session: str = "s1",
    turns: tuple[str, ...] = (),
    entities: tuple[str, ...] = (),
    nodes: tuple[str, ...] = (),
    queries: tuple[str, ...] = (),
    scores: dict[str, float] | None = None,
) -> Candidate:
    return Candidate(
        item_id=item_id,
        kind=kind,
        text=text or item_id,
        session_id=session,
        turn_ids=turns or (f"t-{item_id}",),
        entities=entities,
        node_ids=nodes,
        queries=queries,
        channel_scores=scores or {},
    )


def fused(c: Candidate, best: float, route: float = 1.0, routes: tuple[str, ...] = ("A",)) -> Fused:
    return Fused(candidate=c, rrf=best / 61, best=best, route_score=route, routes=routes)


def ids(items: list[Fused]) -> list[str]:
    return [f.item_id for f in items]


# --- fusion and scores ---------------------------------------------------------------------


def test_fused_order_item_in_both_routes_sums_rrf_and_merges_provenance() -> None:
    # A = [x, y], B = [z, y], kappa = 60.
    # y: rrf 1/62 + 1/62 = 1/31; best (61/62); route 2/2 = 1 -> final 0.82*61/62 + 0.18
    # x, z: rrf 1/61; best 61/61 = 1; route 1/2 -> final 0.82 + 0.09 = 0.91 (tie -> by id)
    y_a = cand("y", entities=("Ann",), queries=("qa",), scores={"record_vector": 0.7})
    y_b = cand("y", nodes=("n1",), queries=("qb",), scores={"record_vector": 0.6, "turn_fts": 3.2})
    out = list(
        FusedOrder([RouteRanking("A", [cand("x"), y_a]), RouteRanking("B", [cand("z"), y_b])])
    )
    assert ids(out) == ["y", "x", "z"]
    y, x, _ = out
    assert y.rrf == pytest.approx(1 / 31)
    assert y.best == pytest.approx(61 / 62)
    assert y.route_score == 1.0
    assert y.fused == pytest.approx(0.82 * 61 / 62 + 0.18)  # 0.986774...
    assert y.routes == ("A", "B")
    assert y.candidate.queries == ("qa", "qb")
    assert y.candidate.entities == ("Ann",)
    assert y.candidate.node_ids == ("n1",)
    assert dict(y.candidate.channel_scores) == {"record_vector": 0.7, "turn_fts": 3.2}
    assert y.scores() == {
        "record_vector": 0.7,
        "turn_fts": 3.2,
        "rrf": 0.032258,
        "best": 0.983871,
        "route": 1.0,
        "final": 0.986774,
    }
    assert x.rrf == pytest.approx(1 / 61)
    assert (x.best, x.route_score, x.routes) == (1.0, 0.5, ("A",))
    assert x.fused == pytest.approx(0.91)


def test_fused_order_repeated_item_in_one_route_counts_once_at_best_rank() -> None:
    # A = [x, y, x]: x keeps rank 1 -> rrf 1/61, best 1.0; y rank 2 -> 1/62.
    out = list(FusedOrder([RouteRanking("A", [cand("x"), cand("y"), cand("x")])]))
    assert [(f.item_id, f.rrf) for f in out] == [("x", pytest.approx(1 / 61)), ("y", 1 / 62)]


def test_fused_order_empty_route_counts_in_route_score() -> None:
    out = list(FusedOrder([RouteRanking("A", [cand("x")]), RouteRanking("B", [])]))
    assert out[0].route_score == 0.5


def test_final_score_exact_arithmetic() -> None:
    assert final_score(1.0, 0.5) == pytest.approx(0.91)  # 0.82 + 0.09
    assert final_score(1.0, 1.0) == pytest.approx(1.0)
    assert final_score(0.5, 0.0) == pytest.approx(0.41)  # 0.82 * 0.5


@pytest.mark.parametrize(("k", "routes", "quota"), [(10, 1, 4), (10, 3, 3), (2, 5, 1), (15, 2, 4)])
def test_route_quota(k: int, routes: int, quota: int) -> None:
    assert route_quota(k, routes) == quota


def test_route_quota_rejects_zero_routes() -> None:
    with pytest.raises(ValueError):
        route_quota(10, 0)


# --- signatures ----------------------------------------------------------------------------


def test_signature_similarity_identical_is_one_and_disjoint_is_zero() -> None:
    a = cand("a", text="Ann moved to Paris", entities=("Ann",), nodes=("n1",), queries=("q",))
    b = cand(
        "b", text="Bob sells bikes", session="s2", entities=("Bob",), nodes=("n2",), queries=("r",)
    )
    assert signature_similarity(a, a) == pytest.approx(1.0)
    assert signature_similarity(a, b) == 0.0
    # Identical with empty entities/nodes/queries: empty parts drop out, still 1.
    assert signature_similarity(cand("c"), cand("c")) == pytest.approx(1.0)


def test_signature_similarity_mixed_case_hand_computed() -> None:
    a = cand(
        "a",
        text="Ann moved to Paris",
        turns=("t1", "t2"),
        entities=("Ann", "Paris"),
        nodes=("n1", "n2"),
        queries=("q1",),
    )
    b = cand(
        "b",
        text="Ann loves Paris",
        turns=("t2", "t3"),
        entities=("ann",),
        nodes=("n2",),
        queries=("q2",),
    )
    # session same 1 * .15 = .15 | entities {ann,paris}/{ann} 1/2 * .20 = .10
    # queries 0 * .10 = 0 | nodes 1/2 * .15 = .075 | turns 1/3 * .20 = .0667
    # text {ann,moved,paris} vs {ann,loves,paris} ("to" is a stopword) 2/4 * .20 = .10
    assert signature_similarity(a, b) == pytest.approx(0.15 + 0.10 + 0.075 + 0.2 / 3 + 0.10)


def test_signature_similarity_renormalizes_over_non_empty_parts() -> None:
    a = cand("a", text="coffee beans", turns=("t1",))
    b = cand("b", text="coffee cups", turns=("t2",))
    # Entities, queries, nodes empty on both sides -> weights .15 + .20 + .20 = .55 remain.
    # session 1 * .15 + turns 0 + text {coffee} of {coffee,beans,cups} 1/3 * .20
    assert signature_similarity(a, b) == pytest.approx((0.15 + 0.2 / 3) / 0.55)


def random_candidates(rng: random.Random, n: int) -> list[Candidate]:
    words = ["ann", "bob", "paris", "bikes", "May", "moved", "sells", "the", "a", "cups"]

    def some(pool: list[str], most: int) -> tuple[str, ...]:
        return tuple(rng.sample(pool, rng.randint(0, most)))

    return [
        cand(
            f"c{i:03d}",
            text=" ".join(some(words, 6)) or "x",
            session=rng.choice("ab"),
            turns=some(["t1", "t2", "t3", "t4"], 2) or ("t0",),
            entities=some(["Ann", "ann", "Bob"], 2),
            nodes=some(["n1", "n2", "n3"], 2),
            queries=some(["q1", "q2"], 2),
        )
        for i in range(n)
    ]


def test_reuse_gives_every_pairwise_similarity_exactly() -> None:
    rng = random.Random(11)
    cands = random_candidates(rng, 60)
    reuse = Reuse()
    for _ in range(4):  # overlapping subsets in any order: each grows the rows known
        some = rng.sample(cands, rng.randint(1, 40))
        pairwise = [[signature_similarity(a, b) for b in some] for a in some]
        assert reuse.similarity(some).tolist() == pairwise  # the same floats, not approximately
    assert reuse.similarity(cands).tolist() == [
        [signature_similarity(a, b) for b in cands] for a in cands
    ]
    assert Reuse().similarity([]).shape == (0, 0)


class CountingReuse(Reuse):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def merge(self, item_id: str, candidates: Sequence[Candidate]) -> Candidate:
        self.asked.append(item_id)
        return super().merge(item_id, candidates)


def test_a_fused_order_builds_only_the_items_read_and_selects_as_the_whole_list() -> None:
    rng = random.Random(8)
    # a turn each: coverage stops at each route's first item (with shared turns it may have
    # to read on, past items whose turns are all shown already)
    cands = [replace(c, turn_ids=(f"u{i}",)) for i, c in enumerate(random_candidates(rng, 80))]
    routes = [  # several routes, every item through one or more of them
        RouteRanking(
            r,
            [
                replace(c, queries=(r,), channel_scores={r: rng.random()})
                for c in rng.sample(cands, 50)
            ],
        )
        for r in "ABC"
    ]
    whole = list(FusedOrder(routes))
    # the order it precomputed is that of the built items' own scores
    assert whole == sorted(whole, key=lambda f: (-f.fused, -f.rrf, f.item_id))
    reuse = CountingReuse()
    order = FusedOrder(routes, reuse=reuse)
    assert len(order) == len(whole)
    assert [f.item_id for f in order[:5]] == [f.item_id for f in whole[:5]]
    assert reuse.asked == [f.item_id for f in whole[:5]]  # nothing past what was read
    assert order[-1] == whole[-1] and list(order) == whole
    for k in (3, 10):
        reuse = CountingReuse()
        assert select(FusedOrder(routes, reuse=reuse), k, 3, reuse=reuse) == select(whole, k, 3)
        assert len(reuse.asked) < len(whole)  # the pool and each route's first, not all
        assert select(FusedOrder(routes), k, 3, first=2) == select(whole, k, 3, first=2)


def test_fusing_again_with_reuse_keeps_every_score_and_merge() -> None:
    rng = random.Random(5)
    cands = random_candidates(rng, 30)
    routes = [  # one item through several routes: other queries and scores in each
        RouteRanking(
            r,
            [
                replace(c, queries=(r,), channel_scores={r: rng.random()})
                for c in rng.sample(cands, 20)
            ],
        )
        for r in "ABC"
    ]
    reordered = [RouteRanking(r.route_id, r.candidates[::-1]) for r in routes]
    reuse = Reuse()
    list(FusedOrder(routes, reuse=reuse))  # every item merged in the routes' own order first
    again = list(FusedOrder(reordered, reuse=reuse))
    plain = list(FusedOrder(reordered))
    assert [(f.item_id, f.rrf, f.best, f.routes) for f in again] == [
        (f.item_id, f.rrf, f.best, f.routes) for f in plain
    ]
    for a, b in zip(again, plain, strict=True):  # merged once: the same sets, either order
        assert set(a.candidate.turn_ids) == set(b.candidate.turn_ids)
        assert set(a.candidate.queries) == set(b.candidate.queries)
        assert a.candidate.channel_scores == b.candidate.channel_scores


# --- selection -----------------------------------------------------------------------------


def test_select_route_coverage_includes_weaker_route_up_to_quota() -> None:
    a = [fused(cand(f"a{i}", session=f"sa{i}"), 1.0 - i / 100, 0.5, ("A",)) for i in range(1, 6)]
    b = [fused(cand(f"b{i}", session=f"sb{i}"), 0.5 - i / 10, 0.5, ("B",)) for i in (1, 2)]
    every = a + b  # every B item ranks below every A item
    # k=4, 2 routes -> quota 2: A takes a1, a2; B takes b1, b2; k is reached.
    assert ids(select(every, k=4, n_routes=2)) == ["a1", "a2", "b1", "b2"]
    # k=3 -> quota 1: a1, b1 by coverage, then the greedy step adds the best remaining, a2.
    assert ids(select(every, k=3, n_routes=2)) == ["a1", "b1", "a2"]
    # Plain top-4 by final score would have no B item at all.
    assert ids(sorted(every, key=lambda f: -f.fused)[:4]) == ["a1", "a2", "a3", "a4"]


def test_the_first_items_of_a_long_selection_cover_the_routes_as_a_short_one() -> None:
    # five routes, each item a session of its own; route r's items all rank below route r-1's
    every = [
        fused(cand(f"{r}{i}", session=f"s{r}{i}"), 1.0 - n / 10 - i / 100, 0.5, (r,))
        for n, r in enumerate("ABCDE")
        for i in range(1, 5)
    ]
    short = select(every, k=10, n_routes=5)  # quota 2 each: two of every route lead
    assert sorted(ids(short)) == sorted(f"{r}{i}" for r in "ABCDE" for i in (1, 2))
    # the first ten of a selection of twenty are those ten, not four of A, four of B, two of C
    assert ids(select(every, k=20, n_routes=5, first=10)) == ids(short)
    four_each = [f"{r}{i}" for r in "AB" for i in range(1, 5)]
    assert ids(select(every, k=20, n_routes=5))[:10] == [*four_each, "C1", "C2"]


def near_duplicates_pool() -> list[Fused]:
    def dup(item_id: str, text: str) -> Candidate:
        return cand(item_id, text=text, turns=("t1", "t2"), entities=("Ann", "Paris"))

    return [
        fused(dup("A", "Ann moved to Paris in May"), 1.00),
        fused(dup("B", "Ann moved to Paris last May"), 0.99),
        fused(dup("C", "In May Ann moved to Paris"), 0.98),
        fused(
            cand("D", text="Bob adopted a beagle", session="s2", turns=("t9",), entities=("Bob",)),
            0.95,
        ),
        fused(
            cand("F", text="Cid sells bikes", session="s3", turns=("t20",), entities=("Cid",)), 0.50
        ),
    ]


def test_select_diversity_changes_the_kept_set() -> None:
    # final = .82*best + .18 (one route); relevance over the pool (hi 1.0, lo .59)
    #   = 2*(best - .5): A 1, B .98, C .96, D .90, F 0.
    # sim(A,B): session 1, entities 1, turns 1, text {ann,moved,paris,may} vs +{last} 4/5,
    #   queries/nodes empty -> (.15 + .20 + .20 + .20*.8) / .75 = .9467; sim(A,C) = 1; sim(*,D) = 0.
    # pick 1: A. pick 2: B .75*.98 - .25*.9467 = .498, C .72 - .25 = .47, D .75*.90 = .675 -> D.
    # pick 3: B .498 > C .47 -> B. One duplicate (C) is dropped, D is kept.
    pool = near_duplicates_pool()
    out = select(pool, k=3, n_routes=1, redundant=0.0)
    assert set(ids(out)) == {"A", "B", "D"}
    assert ids(out) == ["A", "D", "B"]
    # No diversity penalty: the three duplicates are kept.
    assert set(ids(select(pool, k=3, n_routes=1, lam=1.0, redundant=0.0))) == {"A", "B", "C"}


def test_select_puts_an_item_whose_turns_are_all_shown_last() -> None:
    # B and C stand for the same turns as A: once A is chosen they add nothing, so F (far
    # less relevant, other turns) is taken before them, with or without the diversity term
    pool = near_duplicates_pool()
    assert ids(select(pool, k=3, n_routes=1)) == ["A", "D", "F"]
    assert ids(select(pool, k=3, n_routes=1, lam=1.0)) == ["A", "D", "F"]
    assert ids(select(pool, k=5, n_routes=1))[3:] == ["B", "C"]


def test_select_rejects_pool_not_larger_than_k() -> None:
    with pytest.raises(ValueError):
        select(near_duplicates_pool(), k=3, n_routes=1, pool_factor=1)


def test_select_is_deterministic_with_ties_broken_by_item_id() -> None:
    tied = [fused(cand(i, session=f"s-{i}"), 0.9) for i in ("m", "c", "x", "a")]
    assert ids(select(tied, k=3, n_routes=1)) == ["a", "c", "m"]
    assert ids(select(tied[::-1], k=3, n_routes=1)) == ["a", "c", "m"]
    for routes in ([("A", "m"), ("B", "k")], [("B", "k"), ("A", "m")]):
        out = list(FusedOrder([RouteRanking(r, [cand(i)]) for r, i in routes]))
        assert ids(out) == ["k", "m"]


def reference_select(fused_: list[Fused], k: int) -> list[str]:
    """One route (no coverage step): the greedy pick written pair by pair."""
    ranked = sorted(fused_, key=lambda f: (-f.fused, -f.rrf, f.item_id))
    top = ranked[: 3 * k]
    hi, lo = top[0].fused, top[-1].fused
    rel = {f.item_id: (f.fused - lo) / (hi - lo) if hi > lo else 1.0 for f in top}
    chosen: list[Fused] = []
    pool = list(top)
    while pool and len(chosen) < k:

        def gain(f: Fused) -> tuple[float, str]:
            near = max(
                (signature_similarity(f.candidate, c.candidate) for c in chosen), default=0.0
            )
            lam = SERVED.diversity_lambda
            return (-(lam * rel[f.item_id] - (1 - lam) * near), f.item_id)

        pick = min(pool, key=gain)
        chosen.append(pick)
        pool.remove(pick)
    return [f.item_id for f in chosen]


@pytest.mark.parametrize("seed", range(5))
def test_select_matches_the_pairwise_greedy(seed: int) -> None:
    rng = random.Random(seed)
    cands = random_candidates(rng, 60)
    # few distinct scores, so equal gains happen and the tie rule is exercised
    items = [fused(c, rng.choice([0.5, 0.7, 0.9, 1.0])) for c in cands]
    for k in (1, 5, 15, 25):
        assert ids(select(items, k=k, n_routes=1, redundant=0.0)) == reference_select(items, k)


def test_select_first_stops_at_the_first_items_of_the_whole_selection() -> None:
    rng = random.Random(3)
    cands = random_candidates(rng, 60)
    routes = [RouteRanking(r, rng.sample(cands, 30)) for r in "AB"]
    every = list(FusedOrder(routes))
    whole = select(every, k=20, n_routes=2)
    for first in (1, 6, 20, 40):  # the two routes' coverage comes first, whatever `first` says
        part = select(every, k=20, n_routes=2, first=first)
        assert part == whole[: len(part)]
        assert len(part) >= min(first, 20)
    assert len(select(every, k=20, n_routes=2, first=1)) < len(whole)


def test_select_end_to_end_from_fused_routes() -> None:
    out = list(
        FusedOrder([RouteRanking("A", [cand("a1"), cand("a2")]), RouteRanking("B", [cand("b1")])])
    )
    assert set(ids(select(out, k=2, n_routes=2))) == {"a1", "b1"}
    assert select([], k=5, n_routes=2) == []


def _headed(head: int, k: int = 4) -> list[str]:
    # the route's order (by route_rrf) is a, b, c, d; its head score puts d, then c, first
    order = [
        cand(i, text=f"{i} words {n}", scores={HEAD_SCORE: h})
        for n, (i, h) in enumerate([("a", 0.1), ("b", 0.2), ("c", 0.3), ("d", 0.4)])
    ]
    routes = [RouteRanking("A", order)]
    return ids(with_head(routes, select(list(FusedOrder(routes)), k, 1), k, head))


def test_with_head_takes_the_first_items_by_head_score_and_the_rest_in_order() -> None:
    assert _headed(head=0) == ["a", "b", "c", "d"]
    assert _headed(head=1) == ["d", "a", "b", "c"]
    assert _headed(head=2) == ["d", "c", "a", "b"]
    assert _headed(head=2, k=3) == ["d", "c", "a"]  # k items in all
    assert _headed(head=9, k=2) == ["d", "c"]  # a head longer than k is cut at k


def test_redundant_last_moves_an_item_whose_turns_are_shown_behind_the_rest() -> None:
    window = fused(cand("w", kind="window", turns=("t1", "t2", "t3")), 1.0)
    record = fused(cand("r", turns=("t2",)), 0.9)
    other = fused(cand("o", turns=("t9",)), 0.8)
    again = fused(cand("w2", kind="window", turns=("t2", "t3")), 0.7)
    assert ids(redundant_last([window, record, other, again])) == ["w", "o", "r", "w2"]
    assert ids(redundant_last([record, window, other])) == ["r", "w", "o"]  # w adds t1, t3
    assert redundant_last([]) == []


def test_for_a_when_question_a_record_stating_a_date_is_not_redundant() -> None:
    """ "It's on Sunday, May 19th" adds the date "Ana signed up for the race" (the same
    turn) does not show; a second dated record of that turn, or one a window shows, does not."""
    said = "2024-03-02T18:00:00"
    signed = fused(replace(cand("a", turns=("t1",)), date=said[:10], mentioned=said), 1.0)
    date = fused(replace(cand("b", turns=("t1",)), date="2024-05-19", mentioned=said), 0.9)
    again = fused(replace(cand("c", turns=("t1",)), date="2024-05-19", mentioned=said), 0.85)
    other = fused(cand("o", turns=("t9",)), 0.8)
    chosen = [signed, date, again, other]
    assert ids(redundant_last(chosen)) == ["a", "o", "b", "c"]
    assert ids(redundant_last(chosen, dated=True)) == ["a", "b", "o", "c"]
    window = fused(cand("w", kind="window", turns=("t1", "t2")), 1.0)
    assert ids(redundant_last([window, date, other], dated=True)) == ["w", "o", "b"]
    assert ids(select(chosen, k=3, n_routes=1, dated=True)) == ["a", "b", "o"]


def test_with_head_of_nothing_is_nothing() -> None:
    assert with_head([RouteRanking("A", [])], [], 5, head=10) == []


# --- ablation and budgets ------------------------------------------------------------------


def test_sort_only_orders_by_best_channel_score_then_item_id() -> None:
    items = [
        fused(cand("r1", scores={"record_vector": 0.71}), 1.0),
        fused(cand("t1", scores={"turn_fts": 3.2}), 0.1),
        fused(cand("e0"), 0.9),  # no channel scores -> key 0.0
        fused(cand("r2", scores={"record_vector": 0.9, "turn_fts": 0.5}), 0.2),
        fused(cand("r0", scores={"record_vector": 0.71}), 0.3),
    ]
    assert ids(sort_only(items, k=4)) == ["t1", "r2", "r0", "r1"]


def test_rrf_scores_by_hand() -> None:
    scores = rrf([["a", "b", "c"], ["b", "d"]])
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63)
    assert scores["d"] == pytest.approx(1 / 62)


def test_route_coverage_skips_an_item_whose_turns_another_route_shows() -> None:
    # route B's best item stands for the same turn as route A's: B's quota goes to its next
    a1 = cand("a1", turns=("t1",))
    b_same, b_next = cand("b1", turns=("t1",)), cand("b2", turns=("t7",))
    out = list(FusedOrder([RouteRanking("A", [a1]), RouteRanking("B", [b_same, b_next])]))
    assert ids(select(out, k=2, n_routes=2)) == ["a1", "b2"]


def test_a_demoted_item_loses_its_place_to_a_less_relevant_one() -> None:
    pool = [fused(cand(i), b) for i, b in [("a", 1.0), ("b", 0.9), ("c", 0.5), ("d", 0.1)]]

    def demote(cands: Sequence[Candidate]) -> np.ndarray:
        return np.array([0.5 if c.item_id == "a" else 0.0 for c in cands])

    assert ids(select(pool, 2, 1, pool_factor=2))[0] == "a"
    assert ids(select(pool, 2, 1, pool_factor=2, demote=demote)) == ["b", "a"]
    routes = [RouteRanking("A", [f.candidate for f in pool])]
    head = with_head(routes, select(pool, 2, 1, pool_factor=2), 2, head=1, demote=demote)
    assert ids(head)[0] == "b"
