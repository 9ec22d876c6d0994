"""Which passage of a long turn a request is shown (`workers.text.passages` cut it at index).

A turn that is one passage shows whole. A longer one shows the passage whose words match
the request's content words (the question's and its plan's queries') best, each word
weighed by how few of the turn's passages hold it: a reply about backups says "backup" in
every passage, and the one that also says "restore" and "test" is the answer to how to test
a restore. The first wins a tie: the opening of a reply usually says what the rest is
about. The row keeps its turn id, so provenance is the turn; `span` says where in the turn's
text the passage is, and `span_turn_id` which turn that is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from workers.text.passages import Passage, from_json
from workers.vocabulary import QUESTION_STOPWORDS, SIMILARITY_STOPWORDS

Row = dict[str, Any]
_WORD = re.compile(r"[a-z0-9]+")
_STOP = QUESTION_STOPWORDS | SIMILARITY_STOPWORDS
STEM = 5  # as the scorer compares words: "deployed" ~ "deployment"


def _stemmed(text: str) -> frozenset[str]:
    return frozenset(w[:STEM] for w in _WORD.findall(text.lower()) if w not in _STOP)


stems = lru_cache(maxsize=16384)(_stemmed)  # a request's texts, a passage's heading


def request_terms(texts: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(stems(t) for t in texts))


def shown(row: Row, terms: frozenset[str]) -> Row:
    """The row as evidence shows it: its best passage in `text`, with `span`, when the turn
    was cut into passages; the row itself otherwise."""
    stored = row.get("passages")
    if not stored:
        return row
    text = row["text"]
    prefix = f"{row.get('speaker') or row.get('role')}: "  # as `schemas.exchange.render_turn`
    head = len(prefix) if text.startswith(prefix) else 0
    cut = _cut(stored, text[head:])
    if not cut:
        return row
    found, weight = cut
    # fsum: the same total in any order of the set (its order is the process's string hashes)
    best = max(
        range(len(found)), key=lambda i: (math.fsum(weight[w] for w in terms & found[i][1]), -i)
    )
    p = found[best][0]
    return {
        **row,
        "text": text[:head] + p.shown(text[head:]),
        "span": (p.start, p.end),
        "span_turn_id": row["turn_id"],
    }


Cut = tuple[tuple[tuple[Passage, frozenset[str]], ...], dict[str, float]]


@lru_cache(maxsize=8192)
def _cut(stored: str, body: str) -> Cut | None:
    """A turn's passages, each with the words it shows (its heading's, its lead-in's and its
    own, which no word crosses), and each word's weight, the log of the passages over those
    that show it (a turn recurs in request after request)."""
    found = from_json(stored)
    if len(found) <= 1:
        return None
    shows = tuple(
        (p, _stemmed(body[p.start : p.end]) | stems(p.heading) | stems(p.lead)) for p in found
    )
    held = Counter(w for _, words in shows for w in words)
    n = len(shows) + 1  # a word every passage shows still tells a passage that has it
    return shows, {w: math.log(n / k) for w, k in held.items()}


class Shown:
    """Rows as one request shows them (`shown`): a turn's passage chosen once per request,
    each row keeping its own fields (a channel's score among them)."""

    def __init__(self, terms: frozenset[str]) -> None:
        self.terms = terms
        self._chosen: dict[str, Row] = {}  # a row id -> what `shown` changed of it

    def __call__(self, row: Row) -> Row:
        if not row.get("passages"):
            return row
        rid = row["id"]
        if rid not in self._chosen:
            out = shown(row, self.terms)
            self._chosen[rid] = {k: v for k, v in out.items() if k not in row or row[k] != v}
        return {**row, **self._chosen[rid]} if self._chosen[rid] else row


def show_passages(got: dict[tuple[str, str, str], Any], show: Shown) -> list[Any]:
    """The turn searches' rows as evidence shows them (a long turn: the passage the
    request's words match), in place; every turn row found, for the windows. A vector search
    returns a list of rows per query vector, a text search one list."""
    rows: list[Any] = []
    for key in [k for k in got if k[1] == "turns"]:
        lists = got[key] if key[0] == "vector" else [got[key]]
        lists = [[show(r) for r in found] for found in lists]
        got[key] = lists if key[0] == "vector" else lists[0]
        rows += [r for found in lists for r in found]
    return rows
