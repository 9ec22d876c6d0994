"""What the supersession rules read of a record, and when it was said against another."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schemas.supersession import LinkKind, Supersession
from workers.indexer.values import WORD, content


@dataclass(frozen=True)
class Statement:
    """What the rules read of one record: its words, who said it, and when (an order key
    that is comparable only between statements the rules may call earlier and later)."""

    record_id: str
    text: str
    role: str
    session_id: str
    said_at: datetime | None  # the conversation date
    position: tuple[int, int]  # (segment index, exchange seq) within its session


def earlier(a: Statement, b: Statement) -> bool | None:
    """Whether `a` was said before `b`; None when the order is not known for sure (no dates,
    or two sessions of one date)."""
    if a.session_id == b.session_id:
        if a.position == b.position:
            return None
        return a.position < b.position
    if a.said_at is None or b.said_at is None or a.said_at == b.said_at:
        return None
    return a.said_at < b.said_at


def said_order(s: Statement) -> tuple[int, int]:
    """A sortable reading of when `s` was said, for picking the latest of several olders."""
    day = int(s.said_at.timestamp()) if s.said_at is not None else 0
    return (day, s.position[0] * 1_000_000 + s.position[1])


def first_said(s: Statement) -> tuple[int, int]:
    """The reverse of `said_order`: the earlier said, the larger."""
    day, at = said_order(s)
    return (-day, -at)


def content_words(text: str) -> frozenset[str]:
    return frozenset(content(WORD.findall(text.lower())))


def link(
    namespace: str, kind: LinkKind, older: Statement, newer: Statement, reason: str, rule: str
) -> Supersession:
    """A rule's link between two statements, dated when the newer one was said."""
    return Supersession(
        namespace=namespace,
        kind=kind,
        older_id=older.record_id,
        newer_id=newer.record_id,
        changed_at=newer.said_at,
        reason=reason[:300],
        found_by=rule,
    )
