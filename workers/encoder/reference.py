"""Cross-segment reference context (paper eq. 7, DESIGN §6.2).

The disambiguation note of the latest segment and summaries of the session's most
recent records, carried forward only to resolve references, never as a source of facts.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.records import DISAMBIGUATION_MAX_CHARS, MemoryRecord

NOTE_CHARS = DISAMBIGUATION_MAX_CHARS
TOTAL_CHARS = 2_400
RECENT_RECORDS = 12


class ReferenceContext(BaseModel):
    """Per-session state in Redis; `last_index` keeps a redelivered segment from rolling it back."""

    note: str = ""
    summaries: list[str] = Field(default_factory=list)
    last_index: int = -1

    def render(self, total_chars: int = TOTAL_CHARS) -> str:
        """Note first, then summaries, dropping the OLDEST summaries until it fits."""
        note = self.note[:NOTE_CHARS]
        summaries = list(self.summaries)
        while True:
            parts = []
            if note:
                parts.append(f"Notes: {note}")
            if summaries:
                parts.append("Recent memories:\n" + "\n".join(f"- {s}" for s in summaries))
            text = "\n".join(parts)
            if len(text) <= total_chars or not summaries:
                return text[:total_chars]
            summaries.pop(0)

    def advanced(
        self, segment_index: int, note: str, records: list[MemoryRecord]
    ) -> ReferenceContext:
        """The context after a segment; unchanged for a segment at or before `last_index`."""
        if segment_index <= self.last_index:
            return self
        summaries = [*self.summaries, *(r.normalized_text for r in records)][-RECENT_RECORDS:]
        return ReferenceContext(
            note=(note or self.note)[:NOTE_CHARS], summaries=summaries, last_index=segment_index
        )
