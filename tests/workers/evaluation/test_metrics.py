"""Hand-computed cases for the retrieval metrics (word counts stand in for tokens)."""

from __future__ import annotations

import math

import pytest

from workers.evaluation.metrics import (
    CATEGORIES,
    CATEGORY_ORDER,
    QuestionResult,
    RankedItem,
    aggregate,
    aggregate_by_kind,
    category_name,
    hit_at_k,
    items_within_budget,
    ndcg_any_at_k,
    percentiles,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_budget,
    recall_at_k,
)


def words(text: str) -> int:
    """Fake token count: whitespace words, so a newline separator costs nothing."""
    return len(text.split())


def item(text: str, *turns: str) -> RankedItem:
    return RankedItem(text, turns)


ITEMS = [
    item("one two three", "t1"),  # 3 words
    item("four five", "t2"),  # 2
    item("six seven eight nine", "t3"),  # 4
    item("ten", "t4"),  # 1
]


def test_categories() -> None:
    assert CATEGORIES == {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
    assert category_name(4) == "single-hop"
    assert category_name(5) is None  # adversarial: excluded
    assert CATEGORY_ORDER[0] == "all"


def test_recall_at_k_counts_the_union_of_provenance() -> None:
    items = [item("a", "t1"), item("b", "t2", "t3"), item("c", "t4")]
    gold = {"t2", "t4", "t9"}
    assert recall_at_k(items, gold, 0) == 0.0
    assert recall_at_k(items, gold, 1) == 0.0
    assert recall_at_k(items, gold, 2) == pytest.approx(1 / 3)
    assert recall_at_k(items, gold, 3) == pytest.approx(2 / 3)
    assert recall_at_k(items, gold, 50) == pytest.approx(2 / 3)


def test_hit_at_k_counts_a_question_once_any_gold_turn_is_covered() -> None:
    items = [item("a", "t1"), item("b", "t2", "t3"), item("c", "t4")]
    gold = {"t2", "t4", "t9"}
    assert [hit_at_k(items, gold, k) for k in (0, 1, 2, 3)] == [0.0, 0.0, 1.0, 1.0]
    results = [
        QuestionResult("single-hop", frozenset(gold), items, 1.0),
        QuestionResult("multi-hop", frozenset({"t9"}), items, 1.0),
    ]
    hits = aggregate(results, ks=(2,), budgets=(10,), count=words)["hit_at_k"]
    assert hits["all"]["2"] == 0.5
    assert (hits["single-hop"]["2"], hits["multi-hop"]["2"]) == (1.0, 0.0)


def test_recall_without_gold_is_an_error() -> None:
    with pytest.raises(ValueError):
        recall_at_k(ITEMS, set(), 5)


def test_budget_takes_a_prefix_and_stops_at_the_first_overflow() -> None:
    gold = {"t2", "t4"}
    # 3 + 2 = 5 fits; the 4-word item would overflow, so the 1-word item after it is not used
    assert [i.turn_ids for i in items_within_budget(ITEMS, 5, words)] == [("t1",), ("t2",)]
    assert recall_at_budget(ITEMS, gold, 5, words) == 0.5
    assert recall_at_budget(ITEMS, gold, 9, words) == 0.5  # 3 + 2 + 4; "ten" needs 10
    assert recall_at_budget(ITEMS, gold, 10, words) == 1.0
    assert recall_at_budget(ITEMS, gold, 4, words) == 0.0  # 3 fits, 3 + 2 does not


def test_a_first_item_larger_than_the_budget_gives_zero() -> None:
    # "four five" alone would fit in 2, but the 3-word first item already overflows
    assert recall_at_budget(ITEMS, {"t2"}, 2, words) == 0.0
    assert items_within_budget(ITEMS, 2, words) == []


def test_each_item_pays_for_its_separator() -> None:
    def with_newlines(text: str) -> int:
        return len(text.split()) + text.count("\n")

    # costs 4 and 3: only the first fits in 5
    assert recall_at_budget(ITEMS, {"t2"}, 5, with_newlines) == 0.0
    assert recall_at_budget(ITEMS, {"t2"}, 7, with_newlines) == 1.0


def test_aggregate_by_category() -> None:
    results = [
        QuestionResult("single-hop", frozenset({"a"}), [item("w", "a")], 10.0),
        QuestionResult("single-hop", frozenset({"b", "c"}), [item("w", "b"), item("w", "c")], 20.0),
        QuestionResult("multi-hop", frozenset({"d"}), [item("w", "x"), item("w", "d")], 30.0),
        QuestionResult("temporal", frozenset(), [item("w", "e")], 40.0),  # no evidence: left out
    ]
    out = aggregate(results, ks=(1, 2), budgets=(1,), count=words)
    at_k, at_b = out["recall_at_k"], out["recall_at_budget"]
    assert set(at_k) == set(at_b) == set(CATEGORY_ORDER)
    assert at_k["all"] == {"1": pytest.approx((1 + 0.5 + 0) / 3), "2": 1.0}
    assert at_k["single-hop"] == {"1": 0.75, "2": 1.0}
    assert at_k["multi-hop"] == {"1": 0.0, "2": 1.0}
    assert at_b["all"] == {"1": pytest.approx(0.5)}  # one 1-word item fits in each reply
    assert at_k["temporal"] == {"1": 0.0, "2": 0.0}  # reported, but with count 0
    assert out["counts"] == {
        "all": 3,
        "single-hop": 2,
        "multi-hop": 1,
        "temporal": 0,
        "open-domain": 0,
    }
    # latency covers every question, evidence or not: linear percentiles of 10..40
    assert out["latency_ms"] == {"p50": 25.0, "p95": pytest.approx(38.5)}


def test_aggregate_rejects_unknown_categories() -> None:
    with pytest.raises(ValueError, match="adversarial"):
        aggregate([QuestionResult("adversarial", frozenset({"a"}), [], 1.0)])


def test_percentiles() -> None:
    assert percentiles([]) == {"p50": 0.0, "p95": 0.0}
    assert percentiles([5.0]) == {"p50": 5.0, "p95": 5.0}
    assert percentiles([1.0, 2.0, 3.0, 4.0, 5.0]) == {"p50": 3.0, "p95": pytest.approx(4.8)}


def test_recall_any_and_all() -> None:
    ranked, gold = ["x", "a", "y", "b"], {"a", "b"}
    assert recall_any_at_k(ranked, gold, 1) == 0.0
    assert recall_any_at_k(ranked, gold, 2) == 1.0
    assert recall_all_at_k(ranked, gold, 3) == 0.0
    assert recall_all_at_k(ranked, gold, 4) == 1.0
    assert recall_any_at_k(["x", "x", "a"], {"a"}, 2) == 1.0  # duplicates count once
    # empty gold, as in the official code: any([]) is False, all([]) is True
    assert recall_any_at_k(ranked, set(), 4) == 0.0
    assert recall_all_at_k(ranked, set(), 4) == 1.0


def test_ndcg_follows_the_official_discount() -> None:
    # LongMemEval's dcg(): rank 1 undiscounted, rank r >= 2 divided by log2(r).
    # gold {a, b}, ranking [x, a, y, b], k = 4:
    #   DCG  = 0 + 1/log2(2) + 0 + 1/log2(4) = 1.5
    #   IDCG = 1 + 1/log2(2)                  = 2
    # (the rel/log2(r + 1) convention would give (1/log2(3) + 1/log2(5)) / (1 + 1/log2(3)))
    ranked, gold = ["x", "a", "y", "b"], {"a", "b"}
    assert ndcg_any_at_k(ranked, gold, 4) == pytest.approx(0.75)
    assert ndcg_any_at_k(ranked, gold, 2) == pytest.approx(1 / 2)  # IDCG@2 is still 2
    assert ndcg_any_at_k(ranked, gold, 1) == 0.0
    assert ndcg_any_at_k(["x", "y", "a"], {"a"}, 3) == pytest.approx(1 / math.log2(3))
    assert ndcg_any_at_k(["a", "b"], gold, 10) == 1.0
    assert ndcg_any_at_k(ranked, set(), 4) == 0.0


def test_aggregate_by_kind_scores_each_typed_question_under_its_type() -> None:
    results = [
        QuestionResult("single-hop", frozenset({"a"}), [item("w", "a")], 1.0, kind="update"),
        QuestionResult(
            "open-domain", frozenset({"b", "c"}), [item("w", "x"), item("w", "b")], 1.0, "update"
        ),
        QuestionResult("temporal", frozenset({"d"}), [item("w", "x")], 1.0, kind="order"),
        QuestionResult("temporal", frozenset({"e"}), [item("w", "e")], 1.0),  # untyped
        QuestionResult("temporal", frozenset(), [item("w", "f")], 1.0, kind="recap"),  # no gold
    ]
    out = aggregate_by_kind(results, ks=(1, 2), budgets=(1,), count=words)
    assert list(out["counts"]) == ["order", "update"] and out["counts"]["update"] == 2
    # update: a at rank 1 (1.0); b of {b, c} at rank 2 only (0.0 at 1, 0.5 at 2)
    assert out["recall_at_k"]["update"] == {"1": 0.5, "2": 0.75}
    assert out["hit_at_k"]["update"] == {"1": 0.5, "2": 1.0}
    assert out["recall_at_budget"]["update"] == {"1": 0.5}  # one 1-word item fits
    assert out["recall_at_k"]["order"] == out["hit_at_k"]["order"] == {"1": 0.0, "2": 0.0}
    untyped = aggregate_by_kind(results[3:4], ks=(1,), budgets=(1,), count=words)
    assert untyped == {"recall_at_k": {}, "hit_at_k": {}, "recall_at_budget": {}, "counts": {}}
