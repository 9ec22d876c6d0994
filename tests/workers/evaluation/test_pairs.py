"""Hand-ranked cases for the checks over two statements a question names."""

from __future__ import annotations

from workers.evaluation.metrics import QuestionResult, RankedItem
from workers.evaluation.pairs import both_covered, first_covered, newer_first, pair_counts


def ranked(*turns: str | tuple[str, ...]) -> list[RankedItem]:
    """One item per argument, covering that turn (or those turns)."""
    return [RankedItem("w", t if isinstance(t, tuple) else (t,)) for t in turns]


def test_a_statement_is_covered_at_the_first_item_holding_any_of_its_turns() -> None:
    items = ranked("a", ("b", "c"), "d", "c")
    assert first_covered(items, ["c"]) == 1
    assert first_covered(items, ["d", "c"]) == 1
    assert first_covered(items, ["z"]) is None
    assert first_covered([], ["a"]) is None


def test_the_newer_value_counts_only_within_k_and_above_the_older() -> None:
    assert newer_first(ranked("new", "old"), ["old"], ["new"])
    assert not newer_first(ranked("old", "new"), ["old"], ["new"])
    # the older one outside the top k (or nowhere) leaves the newer above it
    assert newer_first(ranked("x", "new", "old"), ["old"], ["new"], k=2)
    assert newer_first(ranked("new"), ["old"], ["new"])
    # the newer one outside the top k never counts, even with the older nowhere
    assert not newer_first(ranked("x", "y", "new"), ["old"], ["new"], k=2)
    assert not newer_first(ranked("x"), ["old"], ["new"])
    # one item holding both is not "above"
    assert not newer_first(ranked(("old", "new")), ["old"], ["new"])


def test_a_turn_named_on_both_sides_stands_for_the_newer_value() -> None:
    # the same turn is both: it is the newer value, and no turn holds the older alone
    assert newer_first(ranked("x", "t"), ["t"], ["t"])
    assert not newer_first(ranked("x", "y"), ["t"], ["t"], k=2)
    # older {t, o}, newer {t}: t covers the newer at 1, o the older at 0
    assert not newer_first(ranked("o", "t"), ["t", "o"], ["t"])
    assert newer_first(ranked("t", "o"), ["t", "o"], ["t"])


def test_both_statements_must_be_covered_within_k() -> None:
    assert both_covered(ranked("a", "b"), ["a"], ["b"])
    assert both_covered(ranked(("a", "b")), ["a"], ["b"])
    assert not both_covered(ranked("a", "x", "b"), ["a"], ["b"], k=2)
    assert both_covered(ranked("s"), ["s"], ["s"])  # one turn holding both statements
    assert both_covered(ranked("x", "a2"), ["a1", "a2"], ["x"])  # any turn of a statement


def test_pair_counts_counts_the_questions_naming_each_pair() -> None:
    def result(items: list[RankedItem], **sources: list[str]) -> QuestionResult:
        return QuestionResult("single-hop", frozenset({"g"}), items, 0.0, "t", sources)

    results = [
        result(ranked("new", "old"), original_info=["old"], updated_info=["new"]),
        result(ranked("old", "new"), original_info=["old"], updated_info=["new"]),
        result(ranked("a", "b"), first_statement=["a"], second_statement=["b"]),
        result(ranked("a"), first_statement=["a"], second_statement=["b"]),
        result(ranked("a"), first_statement=["a"], second_statement=[]),  # names one only
        result(ranked("e1", "e2"), first_event=["e1"], second_event=["e2"]),  # no check
        result(ranked("a")),
    ]
    assert pair_counts(results) == {
        "newer_first": {"n": 1, "of": 2, "k": 10},
        "both_covered": {"n": 1, "of": 2, "k": 10},
    }
    assert pair_counts(results[2:4], k=1) == {"both_covered": {"n": 0, "of": 2, "k": 1}}
    assert pair_counts(results[5:]) == {}
