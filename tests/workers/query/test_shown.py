"""A record and the turn it was made of among a reply's first items: the turn stays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from tests.workers.builders import HASH_DIM, HashEmbedder, said_in_turns
from tests.workers.query.test_selection import cand, fused, ids
from tests.workers.query.test_service import request
from workers.indexer.service import IndexerService
from workers.query.selection import Fused, redundant_last
from workers.query.service import QueryDeps, QueryService
from workers.query.shown import turns_over_records
from workers.store import EvidenceStore

SIGNED = "Ann signed up for the spring race"
WINDOW = "Ann: I signed up for the spring race!\nBo: Good luck with the training"


def record(item_id: str, turns: tuple[str, ...] = ("t2",), text: str = SIGNED) -> Fused:
    return fused(cand(item_id, text=text, turns=turns), 1.0)


def window(item_id: str, turns: tuple[str, ...], text: str = WINDOW, session: str = "s1") -> Fused:
    return fused(cand(item_id, kind="window", text=text, turns=turns, session=session), 0.8)


def no_turn(f: Fused) -> Fused:
    return replace(f, candidate=replace(f.candidate, turn_ids=()))


def other(item_id: str) -> Fused:
    return fused(cand(item_id, turns=(f"{item_id}-turn",)), 0.9)


def test_the_window_below_a_record_of_its_turn_takes_the_records_place() -> None:
    chosen = [record("r"), other("o"), window("w", ("t1", "t2", "t3")), other("x")]
    assert ids(turns_over_records(chosen, 4)) == ["w", "o", "x", "r"]


def test_a_record_behind_the_turn_that_shows_it_is_selections_case() -> None:
    """`redundant_last` sends it last; this step leaves the order as it is."""
    turn = fused(
        cand("t", kind="turn", text="Ann: I signed up for the spring race!", turns=("t2",)), 1.0
    )
    chosen = [turn, record("r"), other("o")]
    assert ids(turns_over_records(chosen, 3)) == ["t", "r", "o"]
    assert ids(redundant_last(chosen)) == ["t", "o", "r"]


def test_two_records_of_one_turn_give_their_places_to_one_window() -> None:
    chosen = [record("r1"), record("r2"), other("o"), window("w", ("t2", "t3"))]
    assert ids(turns_over_records(chosen, 4)) == ["w", "o", "r1", "r2"]


def test_an_item_the_moved_window_shows_goes_last_too() -> None:
    turn = fused(
        cand("t", kind="turn", text="Bo: Good luck with the training", turns=("t3",)), 0.95
    )
    chosen = [record("r"), turn, other("o"), window("w", ("t2", "t3"))]
    assert ids(turns_over_records(chosen, 4)) == ["w", "o", "t", "r"]


@pytest.mark.parametrize(
    ("kept", "below"),
    [
        (record("r", ("t2", "t5")), window("w", ("t1", "t2"))),  # t5 not shown
        (record("r"), window("w", ("t2", "t3"), session="s2")),
        (no_turn(record("r")), window("w", ("t1", "t2"))),
        (record("r"), fused(cand("w", text=WINDOW, turns=("t1", "t2")), 0.8)),  # a record
        # the turn's other passage: a long reply's window need not hold what the record says
        (record("r"), window("w", ("t2", "t3"), text="Assistant: ... pace the long runs")),
        (record("r", text="She did it all again"), window("w", ("t2", "t3"))),  # no terms
    ],
    ids=[
        "a turn it does not show",
        "another session",
        "no turn",
        "a record",
        "other words",
        "no index terms",
    ],
)
def test_a_record_stays_unless_an_item_shows_its_turns_and_words(kept: Fused, below: Fused) -> None:
    chosen = [kept, other("o"), below]
    assert ids(turns_over_records(chosen, 3)) == ["r", "o", "w"]


@pytest.mark.parametrize(
    ("said", "moved"),
    [("Ann: Ann packed the tent", True), ("Bo: we packed the tent", False)],
    ids=["half the words", "less than half"],
)
def test_an_item_shows_a_record_holding_half_its_words(said: str, moved: bool) -> None:
    """ "Ann packed the tent, the stove and two maps": six index terms (ann, pack, tent,
    stove, two, map); the first window holds three, the second two."""
    kept = record("r", text="Ann packed the tent, the stove and two maps")
    chosen = [kept, other("o"), window("w", ("t2", "t3"), text=said)]
    assert ids(turns_over_records(chosen, 3)) == (["w", "o", "r"] if moved else ["r", "o", "w"])


def test_only_the_first_items_are_read() -> None:
    chosen = [record("r"), other("o"), window("w", ("t1", "t2"))]
    assert ids(turns_over_records(chosen, 2)) == ["r", "o", "w"]
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


class RecordsFirst:
    """A cross-encoder's scores where one sentence beats a window of lines."""

    name = "records-first"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return [0.0 if "\n" in p else 1.0 for p in passages]


@pytest.mark.asyncio
async def test_after_a_cross_encoder_a_record_keeps_its_place(tmp_path: Path) -> None:
    """Nothing moves past a cross-encoder's order: its record stays above the window of its
    turn."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    said = ["Ann adopted a puppy named Biscuit", "Biscuit chewed the new sofa cushions"]
    await said_in_turns(
        IndexerService(store, HashEmbedder()),
        HashEmbedder(),
        [("s1", datetime(2024, 3, 2), f"s1t{n}", text) for n, text in enumerate(said)],
    )
    svc = QueryService(QueryDeps(store, HashEmbedder(), reranker=RecordsFirst()))
    found = (await svc.search(request("a", "What is the name of the puppy Ann adopted?"))).evidence

    assert "rerank" in found[0].scores
    kept = [
        (r.turn_ids, w.turn_ids)
        for i, r in enumerate(found)
        if r.kind == "record"
        for w in found[i + 1 :]
        if w.kind != "record" and set(r.turn_ids) <= set(w.turn_ids)
    ]
    assert kept
