"""Reference context bounds and ordering (DESIGN §6.2)."""

from __future__ import annotations

from schemas.records import MemoryType, normalize_text
from workers.encoder.reference import NOTE_CHARS, RECENT_RECORDS, TOTAL_CHARS, ReferenceContext


class R:
    """Just what `advanced` reads of a record."""

    def __init__(self, text: str) -> None:
        self.normalized_text = normalize_text(MemoryType.fact, text)


def test_context_keeps_the_twelve_newest_summaries_in_order() -> None:
    ctx = ReferenceContext()
    for i in range(20):
        ctx = ctx.advanced(i, f"note {i}", [R(f"statement {i}")])  # type: ignore[list-item]
    assert len(ctx.summaries) == RECENT_RECORDS
    assert ctx.summaries[0] == "fact: statement 8" and ctx.summaries[-1] == "fact: statement 19"
    assert ctx.note == "note 19"


def test_context_note_and_total_are_bounded_newest_summaries_survive() -> None:
    ctx = ReferenceContext(note="n" * 5000, summaries=[f"{i:02d}" + "x" * 400 for i in range(12)])
    text = ctx.render()
    assert len(text) <= TOTAL_CHARS
    assert "n" * NOTE_CHARS in text and "n" * (NOTE_CHARS + 1) not in text
    assert "11" + "x" * 400 in text  # the newest summary is kept...
    assert "00" + "x" * 400 not in text  # ...the oldest is dropped first


def test_context_does_not_roll_back_for_a_redelivered_segment() -> None:
    ctx = ReferenceContext().advanced(3, "later", [R("b")])  # type: ignore[list-item]
    assert ctx.advanced(2, "earlier", [R("a")]) is ctx  # type: ignore[list-item]


def test_context_empty_note_keeps_the_previous_one() -> None:
    ctx = ReferenceContext().advanced(0, "Speakers: Ann, Bo.", [])
    assert ctx.advanced(1, "", []).note == "Speakers: Ann, Bo."
