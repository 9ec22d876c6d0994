"""A question that names another value of a statement than the one a later statement changed."""

from __future__ import annotations

import pytest

from workers.query.other_value import asks_another_value

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
