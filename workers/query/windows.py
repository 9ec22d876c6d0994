"""Local expansion of raw-turn hits into windows of neighbouring turns (DESIGN §8.3).

A turn alone often misses its other half: the question a reply answers, or the reply that
confirms a plan. A hit becomes the window of up to `radius` turns either side of it, in
conversation order within its session, as long as the window stays within `max_tokens`
(nearer turns first, the one before before the one after): a window of short turns is a
few lines, one next to a long reply takes the reply's passage or stops. In a session with
an assistant, a window stays within its hit's exchange, the user's message and the turns
answering it: the reply before the message answers another one, and the next message starts
another topic as often as not. The window keeps every turn id as provenance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from workers.tokens import count_tokens

Row = dict[str, Any]
WINDOW_TOKENS = 320


def spans(hits: Iterable[Row], radius: int) -> list[tuple[str, int, int]]:
    """`(session_id, first_seq, last_seq)` covering every hit ± `radius` exchanges, merged.

    An exchange holds at least one turn, so `radius` exchanges either side always contain
    `radius` turns either side (when the session has them).
    """
    by_session: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for h in hits:
        seq = int(h["seq"])
        by_session[h["session_id"]].append((seq - radius, seq + radius))
    out: list[tuple[str, int, int]] = []
    for session, ranges in sorted(by_session.items()):
        ranges.sort()
        lo, hi = ranges[0]
        for a, b in ranges[1:]:
            if a > hi + 1:
                out.append((session, lo, hi))
                lo = a
            hi = max(hi, b)
        out.append((session, lo, hi))
    return out


@lru_cache(maxsize=32768)
def _count(text: str) -> int:
    """Tokens of a turn's text; the same turns recur in request after request."""
    return count_tokens(text)


def windows(
    hits: Iterable[Row],
    neighbours: Sequence[Row],
    radius: int,
    max_tokens: int = WINDOW_TOKENS,
    count: Callable[[str], int] | None = None,
) -> dict[str, Row]:
    """Each hit's row id -> its window row; hits with no neighbour stay out (kept as turns).

    A window row has the hit's namespace, session and conversation date, the turns' texts
    one per line, all their turn ids in order and the id
    `namespace/session/first_turn..last_turn`, so two hits with the same window merge.
    """
    count = count or _count
    ordered: dict[str, list[Row]] = defaultdict(list)
    for row in neighbours:
        ordered[row["session_id"]].append(row)
    position: dict[str, tuple[str, int]] = {}
    for session, rows in ordered.items():
        rows.sort(key=lambda r: (int(r["seq"]), int(r["idx"])))
        position.update((r["id"], (session, i)) for i, r in enumerate(rows))
    chats = {s for s, rows in ordered.items() if any(r.get("role") == "assistant" for r in rows)}
    out: dict[str, Row] = {}
    for hit in hits:
        if hit["id"] in out or hit["id"] not in position:
            continue
        session, i = position[hit["id"]]
        around = ordered[session]
        lo, hi = _exchange(around, i) if session in chats else (0, len(around) - 1)
        rows = _within(around[lo : hi + 1], i - lo, radius, count, max_tokens)
        if len(rows) < 2:
            continue
        first, last = rows[0]["turn_id"], rows[-1]["turn_id"]
        out[hit["id"]] = {
            "id": f"{hit['namespace']}/{session}/{first}..{last}",
            "namespace": hit["namespace"],
            "session_id": session,
            "session_date": hit.get("session_date"),
            "turn_ids": [r["turn_id"] for r in rows],
            "text": "\n".join(r["text"] for r in rows),
            "hit_turn_id": hit["turn_id"],
            **_passage_of(rows, hit),
        }
    return out


def _passage_of(rows: Sequence[Row], hit: Row) -> Row:
    """Where a window's long turn shows a passage: `span` in that turn's text and the turn,
    the hit's when it is one, else the first such turn's."""
    cut = [r for r in rows if r.get("span") is not None]
    if not cut:
        return {}
    row = next((r for r in cut if r["id"] == hit["id"]), cut[0])
    return {"span": row["span"], "span_turn_id": row["turn_id"]}


def _exchange(rows: Sequence[Row], i: int) -> tuple[int, int]:
    """The first and last row of row `i`'s exchange in a chat: from the user's message at or
    before it to the last turn before the next user message."""
    lo, hi = i, i
    while lo > 0 and rows[lo].get("role") != "user":
        lo -= 1
    while hi + 1 < len(rows) and rows[hi + 1].get("role") != "user":
        hi += 1
    return lo, hi


def _within(
    rows: Sequence[Row],
    i: int,
    radius: int,
    count: Callable[[str], int],
    max_tokens: int,
) -> list[Row]:
    """Row `i` and its neighbours up to `radius` either side, nearest first, while the
    texts fit in `max_tokens`; a side stops at the first turn that does not fit."""
    taken = {i: rows[i]}
    used = count(rows[i]["text"])
    open_sides = {-1, 1}
    for step in range(1, radius + 1):
        for side in (-1, 1):
            j = i + side * step
            if side not in open_sides or not 0 <= j < len(rows):
                open_sides.discard(side)
                continue
            row = rows[j]
            cost = count(row["text"])
            if used + cost > max_tokens:
                open_sides.discard(side)
                continue
            used += cost
            taken[j] = row
    return [taken[j] for j in sorted(taken)]
