"""Pairwise likeness computed at once: the same floats as the pairwise formula, whatever the
process's vocabulary of signature values has seen and whoever numbers values alongside."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from tests.workers.query.test_selection import random_candidates
from workers.query import likeness
from workers.query.likeness import Likeness, signature_similarity
from workers.query.selection import Candidate


def pairwise(cands: list[Candidate]) -> list[list[float]]:
    return [[signature_similarity(a, b) for b in cands] for a in cands]


def test_a_request_keeps_its_numbers_when_the_process_starts_a_new_vocabulary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(likeness, "MAX_KEPT", 5)  # every request after the first starts anew
    monkeypatch.setattr(likeness, "_vocabulary", likeness._Vocabulary())
    rng = random.Random(3)
    cands = random_candidates(rng, 40)
    first = Likeness()
    assert first.of(cands[:20]).tolist() == pairwise(cands[:20])
    second = Likeness()  # past MAX_KEPT: a new vocabulary, numbering the same values anew
    assert second.of(cands[10:]).tolist() == pairwise(cands[10:])
    # the first request reads more items: still numbered in its own vocabulary
    assert first.of(cands).tolist() == pairwise(cands)


def test_requests_numbering_new_values_at_once_never_share_a_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(likeness, "_vocabulary", likeness._Vocabulary())
    pools = [random_candidates(random.Random(seed), 50) for seed in range(16)]

    def one(cands: list[Candidate]) -> bool:
        return bool(Likeness().of(cands).tolist() == pairwise(cands))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, pools))


def test_parts_with_one_value_each_or_some_value_each_give_the_pairwise_floats() -> None:
    rng = random.Random(5)  # one turn each (as the session), entities on every candidate
    cands = [
        replace(c, turn_ids=c.turn_ids[:1], entities=c.entities or ("Ann",))
        for c in random_candidates(rng, 40)
    ]
    assert Likeness().of(cands).tolist() == pairwise(cands)


def test_an_item_whose_content_changes_is_compared_by_its_new_content() -> None:
    rng = random.Random(9)  # the same item ids again, with other words, turns and entities
    cands = random_candidates(rng, 30)
    assert Likeness().of(cands).tolist() == pairwise(cands)
    changed = [
        replace(c, text=f"{c.text} moved", turn_ids=(*c.turn_ids, "t9"), entities=("Zed",))
        for c in cands
    ]
    assert Likeness().of(changed).tolist() == pairwise(changed)
