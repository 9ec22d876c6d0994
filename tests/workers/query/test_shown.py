"""A record and the turn it was made of among a reply's first items: the turn stays."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.workers.builders import HASH_DIM, HashEmbedder, said_in_turns
from tests.workers.query.test_selection import cand, fused, ids
from tests.workers.query.test_service import request
from workers.indexer.service import IndexerService
from workers.query.service import QueryDeps, QueryService
from workers.query.shown import turns_over_records
from workers.store import EvidenceStore


def test_the_window_below_a_record_of_its_turn_takes_the_records_place() -> None:
    record = fused(cand("r", turns=("t2",)), 1.0)
    other = fused(cand("o", turns=("t9",)), 0.9)
    window = fused(cand("w", kind="window", turns=("t1", "t2", "t3")), 0.8)
    after = fused(cand("x", turns=("t7",)), 0.7)
    assert ids(turns_over_records([record, other, window, after], 4)) == ["w", "o", "x", "r"]


def test_a_record_behind_the_turn_that_shows_it_goes_last_and_nothing_moves_up() -> None:
    turn = fused(cand("t", kind="turn", turns=("t2",)), 1.0)
    record = fused(cand("r", turns=("t2",)), 0.9)
    other = fused(cand("o", turns=("t9",)), 0.8)
    assert ids(turns_over_records([turn, record, other], 3)) == ["t", "o", "r"]


def test_two_records_of_one_turn_give_their_places_to_one_window() -> None:
    first = fused(cand("r1", turns=("t2",)), 1.0)
    second = fused(cand("r2", turns=("t2",)), 0.9)
    other = fused(cand("o", turns=("t9",)), 0.8)
    window = fused(cand("w", kind="window", turns=("t2", "t3")), 0.7)
    chosen = [first, second, other, window]
    assert ids(turns_over_records(chosen, 4)) == ["w", "o", "r1", "r2"]


@pytest.mark.parametrize(
    ("record", "window"),
    [
        (cand("r", turns=("t2", "t5")), cand("w", kind="window", turns=("t1", "t2"))),  # t5 not
        (cand("r", turns=("t2",)), cand("w", kind="window", session="s2", turns=("t2",))),
        (cand("r", turns=()), cand("w", kind="window", turns=("t1", "t2"))),  # shows no turn
        (cand("r", turns=("t2",)), cand("w", turns=("t1", "t2"))),  # a record does not stand in
    ],
    ids=["a turn it does not show", "another session", "no turn", "a record"],
)
def test_a_record_stays_unless_an_item_shows_every_turn_of_it(
    record: object, window: object
) -> None:
    chosen = [fused(record, 1.0), fused(cand("o", turns=("t9",)), 0.9), fused(window, 0.8)]
    assert ids(turns_over_records(chosen, 3)) == ["r", "o", "w"]


def test_only_the_first_items_are_read() -> None:
    record = fused(cand("r", turns=("t2",)), 1.0)
    other = fused(cand("o", turns=("t9",)), 0.9)
    window = fused(cand("w", kind="window", turns=("t1", "t2")), 0.8)
    assert ids(turns_over_records([record, other, window], 2)) == ["r", "o", "w"]
    late = fused(cand("l", turns=("t2",)), 0.7)  # past the first items: left where it is
    chosen = [window, other, late]
    assert ids(turns_over_records(chosen, 2)) == ["w", "o", "l"]
    assert turns_over_records([], 30) == []


@pytest.mark.asyncio
async def test_a_reply_does_not_show_a_turn_twice_as_its_record_and_its_window(
    tmp_path: Path,
) -> None:
    """A user's statements, each a raw turn and its record: the reply's items never hold a
    record that another item shows ahead of an item that adds a turn (without the step, the
    question's statement comes as its record first and again inside a window below it)."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    day = datetime(2024, 3, 2)
    said = [
        "Ann adopted a puppy named Biscuit",
        "Biscuit chewed the new sofa cushions",
        "Ann ran the spring half marathon",
        "Ann visited Lisbon with her sister",
        "The train to Porto was late again",
        "Ann baked bread for the neighbours",
    ]
    await said_in_turns(
        IndexerService(store, HashEmbedder()),
        HashEmbedder(),
        [("s1", day, f"s1t{n}", text) for n, text in enumerate(said)],
    )
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(
        request("a", "What is the name of the puppy Ann adopted?", k=10)
    )

    shown = [set(e.turn_ids) for e in reply.evidence if e.kind != "record"]
    again = [
        e.kind == "record" and any(set(e.turn_ids) <= t for t in shown) for e in reply.evidence
    ]
    assert "s1t0" in {t for e in reply.evidence[:2] for t in e.turn_ids}
    assert any(again) and again == sorted(again)  # a record another item shows: after the rest
