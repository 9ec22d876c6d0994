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

Only links one of whose records shares a word with the question move anything (the later
value is often worded apart from the question, the earlier one it replaced is what the
question found), but not one whose older record the question finds by another value than
the one that changed (`workers.query.other_value`), and at most `MAX_MOVES` items move: an
unrelated update does not push the question's evidence down. A
question about the whole history (an order, a summary) keeps its order: it needs every
session's part, not the latest value first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas import EvidenceItem, Role
from schemas.supersession import LinkKind, Supersession
from workers.query.changed import Alike, asks_a_state, change_first
from workers.query.denials import account_beside_denial
from workers.query.hits import record_id_of, record_item_id
from workers.query.other_value import asks_another_value, replaced_values
from workers.query.planner.wording import about_the_history
from workers.query.serialize import serialize_context, within_budget
from workers.store import EvidenceStore
from workers.store.restated import as_they_stand, sayings_of
from workers.store.segments import When, said_after
from workers.vocabulary import QUESTION_STOPWORDS

MAX_MOVES = 4  # items moved or added per request
MIN_ASKED = 1  # words of the question one of the link's records must share
HEAD = 10  # the items a link-free reorder works among: what an answer reads first
SHOWN_SHARE = 0.5  # of a record's words a passage shows when it shows the record
MORE_WORDS = 3  # content words beyond its replaced records' by which a turn says more
SAME_SUBJECT = 0.35  # share of the shorter item's words two items must have in common
SUBJECT_WORDS = 60  # the words of an item read for its subject: what it opens with
MAX_LATER = 4  # link-free moves per request
BOTH_ASKED = 3  # words of the question two items must both say to be about what it asks


# the question asks what held before a change, not what holds now
_PAST = re.compile(
    r"\b(?:before|used to|originally|original|initially|initial|at first|previously|previous"
    r"|in the past|formerly|former|earlier|prior to|first (?:set|planned|chose|picked)|old)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'’-]*")
_WHEN_NOW = frozenset(
    ["now", "currently", "current", "today", "still", "anymore", "nowadays", "lately"]
)
# a question asking for a value: what it is, how many, when
_VALUE_ASKED = re.compile(r"^\W*(?:what|which|when|how many|how much|where|who)\b", re.IGNORECASE)
# ... of a span between two things said, not of a state
_SPAN = re.compile(
    r"\b(?:between|how long|passed|ago|happened first|after i|across|in total)\b", re.IGNORECASE
)
# ... in the past tense: what was said or done then, not what holds now
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had)\b", re.IGNORECASE)


def about_the_past(question: str) -> bool:
    return bool(_PAST.search(question))


def about_the_present(question: str) -> bool:
    """The question asks for a value as it stands (what is it, how many, when is it), in
    the present tense: not what was said or done then, a span between two things said,
    or the whole history."""
    return (
        bool(_VALUE_ASKED.search(question))
        and not _SPAN.search(question)
        and not _PAST_TENSE.search(question)
        and not about_the_past(question)
        and not about_the_history(question)
    )


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
        """The records an item stands for in the order (`records`: those a link joins): a
        record itself alone, whatever else its turn said (a standing rule said in the message
        that gave the budget is not replaced with it); a turn or window its turns' records."""
        if item.kind == "record":
            rid = record_id_of(item.item_id)
            return {rid} if rid in self.records else set()
        return {r for t in item.turn_ids for r in self.by_turn.get(t, ())}

    def said_by(self, item: EvidenceItem) -> set[str]:
        """The records whose marks an item carries: those it stands for, but of an item that
        shows a long turn as a passage (`span`; a window may cut more than one) only those
        whose words it shows: a record of another part of the reply (a budget, where the
        passage shown is a launch date) would mark it replaced by what replaced the budget."""
        mine = self.stands_for(item)
        if item.kind == "record" or item.span is None:
            return mine
        shown = _content(item.text)
        return {r for r in mine if _shows(shown, self.records[r]["semantic_text"])}

    def turns(self, rid: str) -> set[str]:
        return set(self.records.get(rid, {}).get("evidence") or ())

    def replaces(self, a: EvidenceItem, b: EvidenceItem) -> bool:
        """Whether a supersession says a record `a` stands for replaced one `b` stands for:
        then `a` is the later, whatever its date says (a record said again carries the date
        of its first saying)."""
        mine, theirs = self.stands_for(a), self.stands_for(b)
        return any(
            x.kind is LinkKind.supersedes and x.newer_id in mine and x.older_id in theirs
            for x in self.links
        )


def current_first(
    store: EvidenceStore,
    namespace: str,
    question: str,
    evidence: Sequence[EvidenceItem],
    alike: Alike | None = None,
    room: int | None = None,
) -> tuple[list[EvidenceItem], str, int] | None:
    """The evidence reordered and marked, with its context, at most `room` items (default:
    as many as it has); None when nothing moves and no link touches it (the reply stays as
    selection made it).

    The links' moves first, then the link-free ones inside the head: the later of two items
    about one subject above the earlier and a later statement of a change above an earlier
    statement like it (`alike`: texts' cosines; `workers.query.changed`) for a question
    about the present, an account of what a head item says was never done beside it (a
    question whether it was)."""
    found = _by_links(store, namespace, question, evidence, room)
    linked = found is not None
    items, graph = found if found is not None else (list(evidence), None)
    when = _when_of(store, namespace, items[:HEAD])
    replaces = graph.replaces if graph is not None else None  # a link's order beats dates
    ordered = later_first(question, items, when, replaces=replaces)
    if alike is not None and about_the_present(question) and asks_a_state(question):
        ordered = change_first(question, ordered, when, alike, HEAD, replaces)
    ordered = account_beside_denial(question, ordered, HEAD)
    if not linked and [i.item_id for i in ordered] == [i.item_id for i in evidence]:
        return None
    context, tokens = serialize_context(ordered)
    return ordered, context, tokens


def current_within(
    store: EvidenceStore,
    namespace: str,
    question: str,
    evidence: Sequence[EvidenceItem],
    budget: int,
    alike: Alike | None = None,
) -> tuple[list[EvidenceItem], str, int]:
    """The evidence within a token budget (`within_budget`), today's truth first again among
    what it kept: an item kept whose newer statement's item did not fit (a long window) gets
    that statement's record, which is short, right above it. Else a small budget could give
    an agent only the value that no longer holds."""
    kept = within_budget(evidence, budget)
    again = current_first(store, namespace, question, kept[0], alike, len(evidence))
    if again is None:
        return kept
    fitted = again if again[2] <= budget else within_budget(again[0], budget)
    # its marks' words may take the room of what the budget kept: then that stays
    return fitted if len(fitted[0]) >= len(kept[0]) else kept


def _by_links(
    store: EvidenceStore,
    namespace: str,
    question: str,
    evidence: Sequence[EvidenceItem],
    room: int | None = None,
) -> tuple[list[EvidenceItem], _Graph] | None:
    """The evidence reordered and marked by the namespace's links as they stand
    (`workers.store.restated`), at most `room` items (default: as many as it has), and
    their graph; None when no link touches it."""
    links = store.links.of_namespace(namespace)
    if not links:
        return None
    ids = {x for link in links for x in (link.older_id, link.newer_id)}
    rows = store.records.by_ids(namespace, sorted(ids))
    graph = _Graph(links, {r["id"]: r for r in rows})
    items = list(evidence)
    if not any(graph.stands_for(i) for i in items):
        return None
    links = as_they_stand(links, sayings_of(store.segments, namespace, rows))
    graph.links = links  # which items stand for which records needed the records only
    asked = _subject(question, store.turns.names(namespace))
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
    return [_marked(i, graph) for i in items[: room or len(evidence)]], graph


def _when_of(
    store: EvidenceStore, namespace: str, items: Sequence[EvidenceItem]
) -> Callable[[EvidenceItem], When | None]:
    """When each item was said: its conversation date, session and first turn's exchange
    position (None when the item has no date or its turn is not stored)."""
    firsts = {(i.session_id, i.turn_ids[0]) for i in items if i.turn_ids and i.date is not None}
    seqs = store.turns.seqs(namespace, firsts) if firsts else {}

    def when(item: EvidenceItem) -> When | None:
        if item.date is None or not item.turn_ids:
            return None
        seq = seqs.get((item.session_id, item.turn_ids[0]))
        return None if seq is None else (item.date, item.session_id, seq)

    return when


def later_first(
    question: str,
    items: Sequence[EvidenceItem],
    when: Callable[[EvidenceItem], When | None],
    head: int = HEAD,
    same: float = SAME_SUBJECT,
    replaces: Callable[[EvidenceItem, EvidenceItem], bool] | None = None,
) -> list[EvidenceItem]:
    """For a question about the present: among the first `head` items, an item said later
    about the same subject as one above it moves right above that one, without a link.

    Two items speak of one subject when `same` of the shorter one's opening words (question
    words and function words aside) are the other's too, and both say `BOTH_ASKED` of the
    question's words (both are about what it asks). Only a known order moves anything: two
    sessions of one date are not ordered, and an item a link says replaced the later one
    (`replaces`) stays above it.
    A reorder inside the head: what the reply holds does not change, only which comes first.
    """
    out = list(items)
    if not about_the_present(question):
        return out
    asked = _content(question)
    n = min(head, len(out))
    words = [_opening(i.text) for i in out[:n]]
    at = [when(i) for i in out[:n]]
    settled = (lambda a, b: replaces(out[a], out[b])) if replaces else None
    moves = 0
    p = 0
    while p < n and moves < MAX_LATER:
        later = _latest_alike(p, n, words, at, asked, same, settled)
        if later is None:
            p += 1
            continue
        out.insert(p, out.pop(later))
        words.insert(p, words.pop(later))
        at.insert(p, at.pop(later))
        moves += 1
    return out


def _latest_alike(
    p: int,
    n: int,
    words: Sequence[set[str]],
    at: Sequence[When | None],
    asked: set[str],
    same: float,
    settled: Callable[[int, int], bool] | None = None,
) -> int | None:
    """The latest item below `p` (within `n`) about the subject of item `p`, said after it
    (not one `settled` with it)."""
    mine = at[p]
    if mine is None or len(words[p] & asked) < BOTH_ASKED:
        return None
    best: int | None = None
    for q in range(p + 1, n):
        t = at[q]
        if t is None or not said_after(t, mine) or len(words[p] & words[q] & asked) < BOTH_ASKED:
            continue
        if settled is not None and settled(p, q):
            continue
        shorter = min(len(words[p]), len(words[q])) or 1
        if len(words[p] & words[q]) / shorter < same:
            continue
        top = at[best] if best is not None else None
        if top is None or said_after(t, top):
            best = q
    return best


def _opening(text: str) -> set[str]:
    return _content(" ".join(text.split()[:SUBJECT_WORDS]))


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
    # the newer record, or the older one it replaced, speaks of what the question asks
    # ("How much can I spend?" finds "my budget is 1,500"; "it is now 2,000" replaced it)
    texts = [graph.records[rid]["semantic_text"] for rid in (link.newer_id, link.older_id)]
    if not any(_answers(asked, t) for t in texts):
        return 0
    if asks_another_value(asked, texts[1], texts[0]):
        return 0  # "Which Ubuntu version?" of "runs Ubuntu 22.04 and has 32 GB of RAM"
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
    mine = graph.said_by(item)
    if not mine:
        return item
    by: list[str] = []
    newer_of: dict[str, list[str]] = {}  # each replaced record's newer statements' words
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
            newer_of.setdefault(link.older_id, []).append(
                graph.records[link.newer_id]["semantic_text"]
            )
            until += [link.changed_at] if link.changed_at else []
        elif link.newer_id in mine and link.older_id not in mine:
            replaced.append(link.older_id)
            since += [link.changed_at] if link.changed_at else []
    if not (by or replaced or conflict):
        return item
    valid_to = _iso(min(until)) if until else None
    return item.model_copy(
        update={
            "superseded_by": _unique(by),
            "replaced_values": replaced_values(
                {r: graph.records[r]["semantic_text"] for r in newer_of},
                newer_of,
                says_more=item.kind != "record" and _says_more(item, graph, mine, newer_of),
            ),
            "supersedes": _unique(replaced),
            "conflict": _unique(conflict),
            "valid_from": _valid_from(item, since, valid_to),
            "valid_to": valid_to,
        }
    )


def _says_more(
    item: EvidenceItem, graph: _Graph, mine: Collection[str], replaced: Collection[str]
) -> bool:
    """Whether a turn or window says more than its `replaced` records: it shows (`mine`) a
    record no link replaced, or `MORE_WORDS` content words beyond theirs (a rule said beside
    a changed address, of which only linked records are read)."""
    if any(r not in replaced for r in mine):
        return True
    theirs = set().union(*(_content(graph.records[r]["semantic_text"]) for r in replaced))
    return len(_content(item.text) - theirs) >= MORE_WORDS


def _valid_from(item: EvidenceItem, since: list[datetime], valid_to: str | None) -> str | None:
    """When what the item says became current: the change by which it replaced an earlier
    statement, else the day it was said. Not the date it speaks of (a flight said on 10
    January to leave on 3 March was current from 10 January), and never after `valid_to`:
    an item said again after a later statement replaced it (a repetition that stands for
    the earlier record) has no start its links can tell, so it gets none."""
    start = _iso(max(since)) if since else (_iso(item.date) if item.date else None)
    if start is not None and valid_to is not None and start > valid_to:
        return None
    return start


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
    (more would leave out updates worded apart from the question); a question whose words
    name no subject ("What about Ana now?") speaks of no record's."""
    return len(asked & _content(text)) >= MIN_ASKED


def _subject(question: str, speakers: Sequence[str]) -> set[str]:
    """The question's words that say what it asks about: not when ("now", "currently": every
    update says "now") nor who of the namespace's speakers (every record of theirs names
    them), which would tie the question to any change of theirs."""
    names = {w for s in speakers for w in _content(s)}
    names |= {f"{w}{mark}s" for w in names for mark in "'’"}
    return _content(question) - _WHEN_NOW - names


def _shows(shown: set[str], record: str) -> bool:
    """Whether an item's words hold a record's: `SHOWN_SHARE` of its content words (a record
    rewrites its turn's sentence: names for "I", a date resolved, a few words of context)."""
    words = _content(record)
    return bool(words) and len(words & shown) >= SHOWN_SHARE * len(words)


def _content(text: str) -> set[str]:
    words = _WORD.findall(text.lower())
    return {w for w in words if len(w) >= 3 and w not in QUESTION_STOPWORDS}


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _iso(d: datetime) -> str:
    return d.date().isoformat()
