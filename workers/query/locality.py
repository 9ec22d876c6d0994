"""Conversation locality: evidence for a question often sits next to the best items found.

A conversation stays on a subject for a few turns, so after selection an item within
NEAR_RADIUS exchanges of the first NEAR_TOP items' turns (same session) moves NEAR_BONUS
places up; the constants were chosen on LoCoMo's dev split with each conversation held back
(docs/notes/issue25.md, round 9).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workers.query.selection import Candidate, Fused

NEAR_TOP = 3
NEAR_RADIUS = 2
NEAR_BONUS = 20

Seqs = Mapping[tuple[str, str], int]  # (session_id, turn_id) -> exchange position


def near_first(chosen: Sequence[Fused], seqs: Seqs, pool: int) -> list[Fused]:
    """`chosen` with each of its items after the first NEAR_TOP and within the first `pool`
    moved NEAR_BONUS places up when one of its turns is within NEAR_RADIUS exchanges of a
    turn of those first items in the same session (a stable sort: ties keep their order)."""
    anchors: dict[str, list[int]] = {}
    for f in chosen[:NEAR_TOP]:
        anchors.setdefault(f.candidate.session_id, []).extend(_positions(f.candidate, seqs))

    def near(f: Fused) -> bool:
        at = anchors.get(f.candidate.session_id, [])
        return any(abs(p - a) <= NEAR_RADIUS for p in _positions(f.candidate, seqs) for a in at)

    movable = list(chosen[NEAR_TOP:pool])
    order = sorted(range(len(movable)), key=lambda i: i - (NEAR_BONUS if near(movable[i]) else 0))
    return [*chosen[:NEAR_TOP], *(movable[i] for i in order), *chosen[pool:]]


def _positions(c: Candidate, seqs: Seqs) -> list[int]:
    return [seqs[(c.session_id, t)] for t in c.turn_ids if (c.session_id, t) in seqs]
