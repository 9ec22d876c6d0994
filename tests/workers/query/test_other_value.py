"""A question that names another value of a statement than the one a later statement changed."""

from __future__ import annotations

import pytest

from schemas import EvidenceItem
from workers.query.other_value import asks_another_value, replaced_part, replaced_values
from workers.query.serialize import currency_notes

OLDER = "Dana's home server runs Ubuntu 22.04 and has 32 GB of RAM."
NEWER = "Dana upgraded the server: it now has 64 GB of RAM."


@pytest.mark.parametrize(
    ("asked", "another"),
    [
        ({"ubuntu", "version"}, True),  # the value that stayed
        ({"ram", "server"}, False),  # the one that changed names no label; nothing else named
        ({"much", "memory"}, False),
        ({"ubuntu", "ram"}, False),  # "How much RAM does my Ubuntu server have?"
    ],
)
def test_a_question_naming_the_label_of_a_value_that_stayed(asked: set[str], another: bool) -> None:
    assert asks_another_value(asked, OLDER, NEWER) is another


def test_a_question_naming_the_changed_values_label_asks_of_it() -> None:
    older = "We run Postgres 15 and Redis 6 in production."
    newer = "We upgraded to Postgres 16 last week."
    assert asks_another_value({"redis", "version"}, older, newer)
    assert not asks_another_value({"postgres", "version"}, older, newer)
    assert not asks_another_value({"postgres", "redis"}, older, newer)  # both: unsure


def test_statements_without_a_changed_value_say_nothing() -> None:
    assert not asks_another_value({"ubuntu"}, OLDER, "We switched from Flask to FastAPI.")
    assert not asks_another_value({"ubuntu"}, "I live in Porto.", "I moved to Lisbon.")


def test_a_long_statement_is_not_read_for_its_values() -> None:
    assert not asks_another_value({"ubuntu"}, OLDER + " 1" * 400, NEWER)


def test_the_part_a_later_statement_replaced_is_named_as_said() -> None:
    assert replaced_part(OLDER, [NEWER]) == ["32 GB"]
    older = "We run Postgres 15 and Redis 6 in production."
    assert replaced_part(older, ["We upgraded to Postgres 16 last week."]) == ["Postgres 15"]
    sleep = "I run 3 miles a day and sleep 7 hours."
    assert replaced_part(sleep, ["I now run 5 miles a day."]) == ["3 miles"]
    # two statements that together replace every value: replaced whole
    both = ["I now run 5 miles a day.", "I now sleep 8 hours."]
    assert replaced_part(sleep, both) == []


@pytest.mark.parametrize(
    "older",
    [
        "The budget is $1,500.",  # one value, replaced whole
        "Our budget is $1,500 as of March 3.",  # the date is of the value, not another value
        "The budget is $1,500 and the deadline is March 3.",  # a date: not told apart
        "I live in Porto.",  # no value the rule reads
        OLDER + " 1" * 400,  # too long to read
    ],
)
def test_a_statement_replaced_whole_names_no_part(older: str) -> None:
    assert replaced_part(older, ["The budget is now $2,000."]) == []


def test_the_note_of_a_statement_replaced_in_part() -> None:
    item = EvidenceItem(
        kind="record",
        item_id="ns/record/a",
        text=OLDER,
        turn_ids=["D1:9"],
        session_id="s1",
        superseded_by=["b"],
        replaced_values=["32 GB"],
        valid_to="2024-08-02",
    )
    assert currency_notes(item) == [
        "its 32 GB replaced on 2 August 2024 by a later statement",
        "its other values were not said to change",
    ]
    whole = item.model_copy(update={"replaced_values": []})
    assert currency_notes(whole) == ["replaced on 2 August 2024 by a later statement"]


def test_an_item_that_says_more_names_each_replaced_statement() -> None:
    """A window holding a changed address and a standing rule: the address is named (whole,
    it keeps no other value), a compound statement by the values replaced."""
    older = {"a": "Marta lives in Lyon.", "b": OLDER}
    newer_of = {"a": ["Marta moved to Bergen."], "b": ["It now has 64 GB of RAM."]}
    assert replaced_values(older, newer_of, says_more=True) == ["Marta lives in Lyon", "32 GB"]
    assert replaced_values(older, newer_of, says_more=False) == []  # one replaced whole
    assert replaced_values({"b": OLDER}, {"b": newer_of["b"]}, says_more=False) == ["32 GB"]
