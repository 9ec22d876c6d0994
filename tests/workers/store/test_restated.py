"""The links as they stand when a record was said again after it was replaced: which
sayings are later than which, what a reversal keeps, and what a chain's later sayings make."""

from __future__ import annotations

from datetime import datetime

from schemas.supersession import LinkKind, Supersession
from workers.store.restated import FOUND_BY, as_they_stand, changes, said_again, sayings
from workers.store.segments import Place, said_after

MARCH, APRIL, MAY, JUNE = (datetime(2024, m, 2) for m in (3, 4, 5, 6))


def link(older: str, newer: str, kind: LinkKind = LinkKind.supersedes) -> Supersession:
    return Supersession(
        namespace="a", kind=kind, older_id=older, newer_id=newer, found_by="rule:value-change"
    )


def pairs(links: list[Supersession]) -> set[tuple[str, str]]:
    return {(x.older_id, x.newer_id) for x in links}


def test_a_later_saying_is_a_later_date_or_later_in_the_same_session() -> None:
    assert said_after(Place(APRIL, "s2", 0), Place(MARCH, "s9", 5))
    assert said_after(Place(MARCH, "s1", 2), Place(MARCH, "s1", 1))
    assert not said_after(Place(MARCH, "s2", 2), Place(MARCH, "s1", 1))  # two sessions, one day
    assert not said_after(Place(MARCH, "s1", 1), Place(MARCH, "s1", 1))


def test_a_records_sayings_are_its_dated_segments_in_order() -> None:
    places = {"s1/0": Place(MARCH, "s1", 0), "s3/0": Place(APRIL, "s3", 0)}
    rows = [
        {"id": "x", "segment_ids": ["s3/0", "s1/0"]},
        {"id": "y", "segment_ids": ["s2/0"]},  # its segment has no date: no saying known
    ]
    assert sayings(rows, places) == {"x": [Place(MARCH, "s1", 0), Place(APRIL, "s3", 0)]}


def test_only_a_supersession_whose_older_record_was_said_later_is_reversed() -> None:
    said = {
        "x": [Place(MARCH, "s1", 0), Place(MAY, "s3", 0)],
        "y": [Place(APRIL, "s2", 0)],
        "z": [Place(JUNE, "s4", 0)],
    }
    links = [link("x", "y"), link("y", "z"), link("x", "y", LinkKind.conflict)]
    (back,) = said_again(links, said)
    assert (back.older_id, back.newer_id, back.changed_at) == ("y", "x", MAY)
    assert back.found_by == FOUND_BY and "said again on 2024-05-02" in back.reason
    # two sessions of one day: which came last is not known, so the link stands
    same_day = {"x": [Place(MAY, "s3", 0)], "z": [Place(MAY, "s4", 0)]}
    assert said_again([link("x", "z")], same_day) == []


def test_links_as_they_stand_replace_the_undone_one_and_keep_a_found_reverse_once() -> None:
    said = {"x": [Place(MARCH, "s1", 0), Place(MAY, "s3", 0)], "y": [Place(APRIL, "s2", 0)]}
    assert pairs(as_they_stand([link("x", "y")], said)) == {("y", "x")}
    found_back = link("y", "x").model_copy(update={"found_by": "llm:m", "reason": "moved back"})
    assert as_they_stand([link("x", "y"), found_back], said) == [found_back]
    once = {"x": [Place(MARCH, "s1", 0)], "y": [Place(APRIL, "s2", 0)]}
    assert as_they_stand([link("x", "y")], once) == [link("x", "y")]


def test_a_value_said_again_is_replaced_by_the_next_one_said_after_it() -> None:
    """900 (March), 650 (April), 900 again (May), 700 (June): the rules linked the 700 to the
    650 it followed in their order; the 900 said in May is what the 700 replaces."""
    said = {
        "900": [Place(MARCH, "s1", 0), Place(MAY, "s3", 0)],
        "650": [Place(APRIL, "s2", 0)],
        "700": [Place(JUNE, "s4", 0)],
    }
    found = [
        link("900", "650").model_copy(update={"changed_at": APRIL}),
        link("650", "700").model_copy(update={"changed_at": JUNE}),
    ]
    stood = as_they_stand(found, said)
    assert pairs(stood) == {("650", "900"), ("650", "700"), ("900", "700")}
    assert {x.older_id for x in stood} == {"650", "900"}  # only the 700 replaces nothing
    assert [x.changed_at for x in stood if x.newer_id == "700" and x.older_id == "900"] == [JUNE]
    story = changes(found, said)
    assert [(x.older_id, x.newer_id) for x in story][:2] == [("900", "650"), ("650", "900")]
    assert pairs(story) == pairs(found) | pairs(stood)


def test_the_next_saying_rule_leaves_a_chain_with_a_record_of_no_dated_saying() -> None:
    said = {"900": [Place(MARCH, "s1", 0), Place(MAY, "s3", 0)], "650": [Place(APRIL, "s2", 0)]}
    found = [link("900", "650"), link("650", "700")]  # the 700's saying has no date
    assert pairs(as_they_stand(found, said)) == {("650", "900"), ("650", "700")}


def test_records_said_once_are_read_as_found_though_a_chain_joins_them() -> None:
    """The heater's 900 watts and the fan's 50 in one statement, then "the heater now 650"
    and "the fan now 40": two attributes the rules kept apart stay apart."""
    said = {
        "both": [Place(MARCH, "s1", 0)],
        "heater": [Place(APRIL, "s2", 0)],
        "fan": [Place(JUNE, "s3", 0)],
    }
    found = [link("both", "heater"), link("both", "fan")]
    assert pairs(as_they_stand(found, said)) == pairs(found)


def test_a_value_said_before_one_said_again_is_replaced_by_it() -> None:
    """900 (March), 650 (April), 700 (May), 900 again (June): the 900 is current, and the
    700 it follows is what it replaces, from June."""
    said = {
        "900": [Place(MARCH, "s1", 0), Place(JUNE, "s4", 0)],
        "650": [Place(APRIL, "s2", 0)],
        "700": [Place(MAY, "s3", 0)],
    }
    stood = as_they_stand([link("900", "650"), link("650", "700")], said)
    assert {x.older_id for x in stood} == {"650", "700"}  # only the 900 replaces nothing
    assert [x.changed_at for x in stood if (x.older_id, x.newer_id) == ("700", "900")] == [JUNE]


def test_a_change_back_dates_from_the_first_saying_after_the_change() -> None:
    said = {
        "900": [Place(MARCH, "s1", 0), Place(MAY, "s3", 0), Place(JUNE, "s4", 0)],
        "650": [Place(APRIL, "s2", 0)],
    }
    (back,) = said_again([link("900", "650")], said)
    assert back.changed_at == MAY
