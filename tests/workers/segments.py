"""Finalized segments for tests, built from their exchanges."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from schemas import FinalizeReason, Segment, SegmentExchange, SegmentMode, segment_id


def segment_of(
    exchanges: Sequence[SegmentExchange],
    *,
    date: datetime | None = None,
    ns: str = "ns",
    session: str = "s1",
    index: int = 0,
) -> Segment:
    """A semantic, session-flushed segment; turn range and tokens come from the exchanges."""
    turn_ids = [t for ex in exchanges for t in ex.turn_ids]
    return Segment(
        segment_id=segment_id(ns, session, index),
        namespace=ns,
        session_id=session,
        index=index,
        mode=SegmentMode.semantic,
        reason=FinalizeReason.session_flush,
        exchanges=list(exchanges),
        first_turn_id=turn_ids[0],
        last_turn_id=turn_ids[-1],
        tokens=sum(ex.tokens for ex in exchanges),
        session_date=date,
    )
