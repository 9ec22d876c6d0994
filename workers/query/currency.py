"""Today's truth first: the evidence reordered and marked by the namespace's links.

Runs once per request after selection (one seam in the service). A link joins two records
(`workers.store.links`); an evidence item stands for a record when it is that record or
shows a turn the record cites (its evidence), so raw turns follow their records' links.

- A question about the present: where an item stands for a superseded record, the item of
  the record that replaced it comes right above it (moved up, or added from the store),
  and the older one stays, marked with when it was replaced.
- A question about the past ("before", "used to", "originally"): the order is left alone;
  the marks still say which is which.
- Two records in conflict, nothing later settling which holds: shown side by side, the
  second right after the first, both marked.

Only links whose other record shares a word with the question move anything, and at most
`MAX_MOVES` items move: an unrelated update does not push the question's evidence down. A
question about the whole history (an order, a summary) keeps its order: it needs every
session's part, not the latest value first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas import EvidenceItem, Role
from schemas.supersession import LinkKind, Supersession
from workers.query.hits import record_item_id
from workers.query.planner.wording import about_the_history
from workers.query.serialize import serialize_context
from workers.store import EvidenceStore
from workers.vocabulary import QUESTION_STOPWORDS

MAX_MOVES = 4  # items moved or added per request
MIN_ASKED = 1  # words of the question the record moved must share

# the question asks what held before a change, not what holds now
_PAST = re.compile(
    r"\b(?:before|used to|originally|original|initially|initial|at first|previously|previous"
    r"|in the past|formerly|former|earlier|prior to|first (?:set|planned|chose|picked)|old)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'’-]*")


def about_the_past(question: str) -> bool:
    return bool(_PAST.search(question))


@dataclass
class _Graph:
    """The namespace's links and the records they join, by record and by turn."""

    links: list[Supersession]
    records: dict[str, dict[str, Any]]
    by_turn: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for rid, row in self.records.items():
            for t in row.get("evidence") or ():
                self.by_turn.setdefault(t, set()).add(rid)

    def stands_for(self, item: EvidenceItem) -> set[str]:
        rid = item.item_id.rsplit("/", 1)[-1]
        found = {rid} if item.kind == "record" and rid in self.records else set()
        for t in item.turn_ids:
            found |= self.by_turn.get(t, set())
        return found

    def turns(self, rid: str) -> set[str]:
        return set(self.records.get(rid, {}).get("evidence") or ())


def current_first(
    store: EvidenceStore, namespace: str, question: str, evidence: Sequence[EvidenceItem]
) -> tuple[list[EvidenceItem], str, int] | None:
    """The evidence reordered and marked, with its context; None when the namespace has no
    link touching it (the reply stays as selection made it)."""
    links = store.links.of_namespace(namespace)
    if not links:
        return None
    ids = {x for link in links for x in (link.older_id, link.newer_id)}
    graph = _Graph(links, {r["id"]: r for r in store.records.by_ids(namespace, sorted(ids))})
    items = list(evidence)
    if not any(graph.stands_for(i) for i in items):
        return None
    asked = _content(question)
    moves = 0 if not about_the_history(question) else MAX_MOVES  # its own order: by session
    for link in links:
        if moves >= MAX_MOVES:
            break
        if link.older_id not in graph.records or link.newer_id not in graph.records:
            continue
        if graph.turns(link.older_id) & graph.turns(link.newer_id):
            continue  # one turn says both: nothing to order
        if link.kind is LinkKind.conflict:
            moves += _side_by_side(items, graph, link, asked)
        elif not about_the_past(question):
            moves += _newer_above(items, graph, link, asked)
    items = [_marked(i, graph) for i in items[: len(evidence)]]
    context, tokens = serialize_context(items)
    return items, context, tokens


def _first(items: Sequence[EvidenceItem], graph: _Graph, rid: str) -> int | None:
    return next((p for p, i in enumerate(items) if rid in graph.stands_for(i)), None)


def _newer_above(
    items: list[EvidenceItem], graph: _Graph, link: Supersession, asked: set[str]
) -> int:
    """The newer record's item right above the older one's; 1 when something moved."""
    at_old = _first(items, graph, link.older_id)
    if at_old is None:
        return 0
    at_new = _first(items, graph, link.newer_id)
    if at_new is not None and at_new < at_old:
        return 0
    if not _answers(asked, graph.records[link.newer_id]["semantic_text"]):
        return 0
    moved = items.pop(at_new) if at_new is not None else _item(graph.records[link.newer_id])
    items.insert(at_old, moved)
    return 1


def _side_by_side(
    items: list[EvidenceItem], graph: _Graph, link: Supersession, asked: set[str]
) -> int:
    """The conflict's other record right after the first one shown; 1 when something moved."""
    at = {rid: _first(items, graph, rid) for rid in (link.older_id, link.newer_id)}
    shown = [(p, rid) for rid, p in at.items() if p is not None]
    if not shown:
        return 0
    first, rid = min(shown)
    other = link.newer_id if rid == link.older_id else link.older_id
    at_other = at[other]
    if at_other is not None and at_other <= first + 1:
        return 0
    if not _answers(asked, graph.records[other]["semantic_text"]):
        return 0
    moved = items.pop(at_other) if at_other is not None else _item(graph.records[other])
    items.insert(first + 1, moved)
    return 1


def _marked(item: EvidenceItem, graph: _Graph) -> EvidenceItem:
    """The item with what its records' links say: what replaced it and when, what it
    replaced and since when, what contradicts it."""
    mine = graph.stands_for(item)
    if not mine:
        return item
    by: list[str] = []
    replaced: list[str] = []
    conflict: list[str] = []
    until: list[datetime] = []
    since: list[datetime] = []
    for link in graph.links:
        if graph.turns(link.older_id) & graph.turns(link.newer_id):
            continue
        if link.kind is LinkKind.conflict:
            if link.older_id in mine and link.newer_id not in mine:
                conflict.append(link.newer_id)
            elif link.newer_id in mine and link.older_id not in mine:
                conflict.append(link.older_id)
        elif link.older_id in mine and link.newer_id not in mine:
            by.append(link.newer_id)
            until += [link.changed_at] if link.changed_at else []
        elif link.newer_id in mine and link.older_id not in mine:
            replaced.append(link.older_id)
            since += [link.changed_at] if link.changed_at else []
    if not (by or replaced or conflict):
        return item
    return item.model_copy(
        update={
            "superseded_by": _unique(by),
            "supersedes": _unique(replaced),
            "conflict": _unique(conflict),
            "valid_from": _iso(max(since)) if since else _valid_from(item),
            "valid_to": _iso(min(until)) if until else None,
        }
    )


def _valid_from(item: EvidenceItem) -> str | None:
    return item.resolved_date or (_iso(item.date) if item.date else None)


def _item(row: dict[str, Any]) -> EvidenceItem:
    """A record from the store as an evidence item, as selection makes one."""
    created = row.get("created_at")
    role = row.get("source_role")
    return EvidenceItem(
        kind="record",
        item_id=record_item_id(row),
        text=row["semantic_text"],
        turn_ids=list(row.get("evidence") or ()),
        session_id=row.get("source_session") or "",
        role=Role(role) if role in ("user", "assistant") else None,
        date=created if isinstance(created, datetime) else None,
        resolved_date=row.get("t_ref")
        or (_iso(created) if isinstance(created, datetime) else None),
        memory_type=row.get("memory_type"),
        context=row.get("context") or None,
        routes=["links"],
    )


def _answers(asked: set[str], text: str) -> bool:
    """The record speaks of what the question asks: it shares `MIN_ASKED` of its words
    (more would leave out updates worded apart from the question)."""
    return len(asked & _content(text)) >= min(MIN_ASKED, len(asked))


def _content(text: str) -> set[str]:
    words = _WORD.findall(text.lower())
    return {w for w in words if len(w) >= 3 and w not in QUESTION_STOPWORDS}


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _iso(d: datetime) -> str:
    return d.date().isoformat()
