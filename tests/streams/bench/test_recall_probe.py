"""The in-process recall harness's report of where gold turns sit."""

from __future__ import annotations

import pytest

from streams.bench.recall_probe import categories_of, gold_ranks
from workers.evaluation.metrics import QuestionResult, RankedItem


def test_gold_turns_are_counted_at_the_first_item_that_covers_them() -> None:
    items = [RankedItem(f"item {i}", (f"D1:{i}",)) for i in range(40)]
    items[35] = RankedItem("a window", ("D1:2", "D1:35", "D1:36"))  # D1:2 was covered at 2
    results = [
        QuestionResult("multi-hop", frozenset({"D1:2", "D1:20", "D1:35", "D9:9"}), items, 0.0),
        QuestionResult("temporal", frozenset({"D1:0"}), items, 0.0),
    ]
    ranks = gold_ranks(results)
    assert ranks["multi-hop"] == {"<=10": 0.25, "<=30": 0.25, "deeper": 0.25, "none": 0.25}
    assert ranks["temporal"] == {"<=10": 1.0, "<=30": 0.0, "deeper": 0.0, "none": 0.0}


def test_categories_are_read_by_name_and_an_unknown_one_is_named() -> None:
    assert categories_of("") is None
    assert categories_of(" open-domain, multi-hop ,") == frozenset({"open-domain", "multi-hop"})
    with pytest.raises(ValueError, match="unknown categories adversarial, open "):
        categories_of("open,adversarial,temporal")
