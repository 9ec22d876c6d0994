"""The links as they stand when a record was said again after it was replaced: which
sayings are later than which, and what the reversal keeps."""

from __future__ import annotations

from datetime import datetime

from schemas.supersession import LinkKind, Supersession
from workers.store.restated import as_they_stand, last_said, said_again
from workers.store.segments import Place, said_after

MARCH, APRIL = datetime(2024, 3, 1), datetime(2024, 4, 2)


def link(older: str, newer: str, kind: LinkKind = LinkKind.supersedes) -> Supersession:
    return Supersession(
        namespace="a", kind=kind, older_id=older, newer_id=newer, found_by="rule:value-change"
    )


def test_a_later_saying_is_a_later_date_or_later_in_the_same_session() -> None:
    assert said_after(Place(APRIL, "s2", 0), Place(MARCH, "s9", 5))
    assert said_after(Place(MARCH, "s1", 2), Place(MARCH, "s1", 1))
    assert not said_after(Place(MARCH, "s2", 2), Place(MARCH, "s1", 1))  # two sessions, one day
    assert not said_after(Place(MARCH, "s1", 1), Place(MARCH, "s1", 1))


def test_a_record_is_last_said_in_its_latest_dated_segment() -> None:
    places = {"s1/0": Place(MARCH, "s1", 0), "s3/0": Place(APRIL, "s3", 0)}
    rows = [
        {"id": "x", "segment_ids": ["s1/0", "s3/0"]},
        {"id": "y", "segment_ids": ["s2/0"]},  # its segment has no date: no saying known
    ]
    assert last_said(rows, places) == {"x": Place(APRIL, "s3", 0)}


def test_only_a_supersession_whose_older_record_was_said_later_is_reversed() -> None:
    last = {"x": Place(APRIL, "s3", 0), "y": Place(MARCH, "s2", 0), "z": Place(APRIL, "s4", 0)}
    (back,) = said_again([link("x", "y"), link("y", "z"), link("x", "y", LinkKind.conflict)], last)
    assert (back.older_id, back.newer_id, back.changed_at) == ("y", "x", APRIL)
    assert back.found_by == "rule:value-change"
    # two sessions of one day: which came last is not known, so the link stands
    same_day = {"x": Place(APRIL, "s3", 0), "z": Place(APRIL, "s4", 0)}
    assert said_again([link("x", "z")], same_day) == []


def test_links_as_they_stand_replace_the_undone_one_and_keep_a_found_reverse_once() -> None:
    last = {"x": Place(APRIL, "s3", 0), "y": Place(MARCH, "s2", 0)}
    stood = as_they_stand([link("x", "y")], last)
    assert [(s.older_id, s.newer_id) for s in stood] == [("y", "x")]
    found_back = link("y", "x").model_copy(update={"found_by": "llm:m", "reason": "moved back"})
    stood = as_they_stand([link("x", "y"), found_back], last)
    assert stood == [found_back]
    assert as_they_stand([link("x", "y")], {"x": Place(MARCH, "s1", 0)}) == [link("x", "y")]
