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
