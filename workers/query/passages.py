"""Which passage of a long turn a request is shown (`workers.text.passages` cut it at index).

A turn that is one passage shows whole. A longer one shows the passage that holds most of
the request's content words (the question's and its plan's queries'), the first on a tie:
the opening of a reply usually says what the rest is about. The row keeps its turn id, so
provenance is the turn; `span` says where in the turn's text the passage is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from workers.text.passages import from_json
from workers.vocabulary import QUESTION_STOPWORDS, SIMILARITY_STOPWORDS

Row = dict[str, Any]
_WORD = re.compile(r"[a-z0-9]+")
_STOP = QUESTION_STOPWORDS | SIMILARITY_STOPWORDS
STEM = 5  # as the scorer compares words: "deployed" ~ "deployment"


@lru_cache(maxsize=16384)
def stems(text: str) -> frozenset[str]:
    return frozenset(w[:STEM] for w in _WORD.findall(text.lower()) if w not in _STOP)


def request_terms(texts: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(stems(t) for t in texts))


def shown(row: Row, terms: frozenset[str]) -> Row:
    """The row as evidence shows it: its best passage in `text`, with `span`, when the turn
    was cut into passages; the row itself otherwise."""
    found = from_json(row.get("passages"))
    if len(found) <= 1:
        return row
    text = row["text"]
    prefix = f"{row.get('speaker') or row.get('role')}: "  # as `schemas.exchange.render_turn`
    head = len(prefix) if text.startswith(prefix) else 0
    body = text[head:]
    best = max(
        range(len(found)),
        key=lambda i: (len(terms & stems(found[i].shown(body))), -i),
    )
    p = found[best]
    return {**row, "text": text[:head] + p.shown(body), "span": (p.start, p.end)}


def show_passages(got: dict[tuple[str, str, str], Any], terms: frozenset[str]) -> list[Any]:
    """The turn searches' rows as evidence shows them (a long turn: the passage `terms`
    match), in place; every turn row found, for the windows. A vector search returns a list
    of rows per query vector, a text search one list."""
    rows: list[Any] = []
    for key in [k for k in got if k[1] == "turns"]:
        lists = got[key] if key[0] == "vector" else [got[key]]
        lists = [[shown(r, terms) for r in found] for found in lists]
        got[key] = lists if key[0] == "vector" else lists[0]
        rows += [r for found in lists for r in found]
    return rows
