"""The query adapter's fit: a question nearer the wrong turn ends nearer the turn that answers it."""

from __future__ import annotations

import numpy as np

from tests.evals.fit_adapter import Split, fit, ranked
from workers.evaluation.metrics import recall_at_k
from workers.query.adapter import QueryAdapter


def split(name: str, seed: int) -> Split:
    """Questions that lie along the axis of a decoy turn, with their answer one axis over:
    a question's vector says "question", the map must learn to move it to the statement."""
    rng = np.random.default_rng(seed)
    turns = np.eye(8, dtype=np.float32)  # axes 0-3 answers, 4-7 their decoys
    q = turns[4:] * 0.8 + turns[:4] * 0.55 + rng.normal(0, 0.02, (4, 8)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ids = [f"{name}{i}" for i in range(8)]
    return Split(name, ids, turns, q, [[0], [1], [2], [3]], ["single-hop"] * 4)


def top1(s: Split, adapter: QueryAdapter | None) -> list[float]:
    """Each question's recall at the first turn."""
    return [recall_at_k(r.items, r.gold, 1) for r in ranked(s, adapter)]


def test_the_fitted_map_moves_unseen_questions_to_their_answers() -> None:
    train, held = [split("a", 0), split("b", 1)], split("c", 2)
    assert top1(held, None) == [0.0] * 4  # the decoy is nearest every question
    adapter = QueryAdapter("toy", fit(train, ridge=0.001, steps=300))
    assert top1(held, adapter) == [1.0] * 4
    # the ridge keeps the map near the identity: a heavy one barely moves anything
    assert top1(held, QueryAdapter("toy", fit(train, ridge=100.0, steps=300))) == [0.0] * 4
