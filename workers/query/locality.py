"""Conversation locality: evidence for a question often sits next to the best items found.

A conversation stays on a subject for a few turns, so after selection an item within a few
exchanges of the first items' turns (same session) moves some places up; how near, how
many first items and how far up is the query preset's `Near`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workers.query.presets import Near
from workers.query.selection import Candidate, Fused

Seqs = Mapping[tuple[str, str], int]  # (session_id, turn_id) -> exchange position


def near_first(chosen: Sequence[Fused], seqs: Seqs, pool: int, how: Near) -> list[Fused]:
    """`chosen` with each of its items after the first `how.top` and within the first `pool`
    moved `how.bonus` places up when one of its turns is within `how.radius` exchanges of a
    turn of those first items in the same session (a stable sort: ties keep their order)."""
    top, radius, bonus = how.top, how.radius, how.bonus
    anchors: dict[str, list[int]] = {}
    for f in chosen[:top]:
        anchors.setdefault(f.candidate.session_id, []).extend(_positions(f.candidate, seqs))

    def near(f: Fused) -> bool:
        at = anchors.get(f.candidate.session_id, [])
        return any(abs(p - a) <= radius for p in _positions(f.candidate, seqs) for a in at)

    movable = list(chosen[top:pool])
    order = sorted(range(len(movable)), key=lambda i: i - (bonus if near(movable[i]) else 0))
    return [*chosen[:top], *(movable[i] for i in order), *chosen[pool:]]


def _positions(c: Candidate, seqs: Seqs) -> list[int]:
    return [seqs[(c.session_id, t)] for t in c.turn_ids if (c.session_id, t) in seqs]
