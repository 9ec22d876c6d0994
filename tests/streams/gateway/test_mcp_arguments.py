"""What MCP's search tool returns of a reply's evidence."""

from __future__ import annotations

from schemas import EvidenceItem
from streams.gateway.mcp_arguments import SearchResult


def item(n: int, final: float | None) -> EvidenceItem:
    return EvidenceItem(
        kind="record",
        item_id=f"a/record/r{n}",
        text=f"statement {n}",
        turn_ids=[f"t{n}"],
        session_id="s1",
        scores={} if final is None else {"final": final},
    )


def test_a_memorys_score_never_rises_above_the_one_before_it() -> None:
    # today's value moved above an item selection scored higher, an instruction put first
    found = SearchResult.of("q", [item(1, 0.97), item(2, 1.0), item(3, 0.5), item(4, None)])
    assert [m.score for m in found.memories] == [0.97, 0.97, 0.5, 0.0]
    assert [m.text for m in found.memories] == [f"statement {n}" for n in (1, 2, 3, 4)]
    # today's value added from the store above what it replaced: not a 0 for all below it
    added = SearchResult.of("q", [item(1, None), item(2, 0.9), item(3, 0.7)])
    assert [m.score for m in added.memories] == [0.9, 0.9, 0.7]
    assert [m.score for m in SearchResult.of("q", [item(1, None)]).memories] == [0.0]


def test_a_memory_says_what_replaced_it_and_what_it_replaced() -> None:
    """The marks `lychee ask` and the context show: a tool's caller can tell today's value."""
    old = item(1, 0.9).model_copy(
        update={"superseded_by": ["r2"], "valid_to": "2026-11-05", "conflict": ["r7"]}
    )
    new = item(2, 0.8).model_copy(update={"supersedes": ["r1"], "valid_from": "2026-11-05"})
    passage = EvidenceItem(
        kind="turn",
        item_id="a/s1/t9",
        text="| HTTP 5xx | yes |",
        turn_ids=["t9"],
        session_id="s1",
        span=(120, 137),
        span_turn_id="t9",
    )
    first, second, third = SearchResult.of("q", [new, old, passage]).memories
    assert (first.id, first.replaces, first.replaced_by) == ("r2", ["r1"], [])
    assert first.notes == ["current since 5 November 2026; replaces an earlier statement"]
    assert (second.id, second.replaced_by, second.conflicts_with) == ("r1", ["r2"], ["r7"])
    assert second.notes == [
        "replaced on 5 November 2026 by a later statement",
        "contradicted by another statement; nothing later settles it",
    ]
    assert (third.id, third.notes, third.span, third.span_turn_id) == (
        "a/s1/t9",
        [],
        (120, 137),
        "t9",
    )
