"""Dates in the offline encoder's records (`workers.encoder.relative_dates`), through the
encoder, on hand-made segments with hand-checked expectations.

The session date is 2023-05-08 13:56, a Monday: yesterday = Sunday 7 May, last Friday =
5 May, next Monday = 15 May, two weeks ago = 24 April, last week = 1 May.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.workers.encoder.test_extractive import one, segment
from workers.encoder.extractive import encode_extractive
from workers.encoder.relative_dates import resolve_dates


@pytest.mark.parametrize(
    ("text", "expected", "t_ref"),
    [
        ("I adopted a puppy yesterday.", "Ana adopted a puppy on 7 May 2023.", "2023-05-07"),
        ("I visited the zoo last Friday.", "Ana visited the zoo on 5 May 2023.", "2023-05-05"),
        ("I baked bread on Friday.", "Ana baked bread on 5 May 2023.", "2023-05-05"),
        ("I will call the vet on Friday.", "Ana will call the vet on 12 May 2023.", "2023-05-12"),
        ("I start a new job next month.", "Ana starts a new job in June 2023.", "2023-06"),
        (
            "I joined a choir two weeks ago.",
            "Ana joined a choir during the week of 24 April 2023.",
            "2023-04-24",
        ),
        (
            "I ran a half marathon 3 days ago.",
            "Ana ran a half marathon on 5 May 2023.",
            "2023-05-05",
        ),
        ("I moved to a new city last year.", "Ana moved to a new city in 2022.", "2022"),
        ("I fly to the coast tomorrow.", "Ana flies to the coast on 9 May 2023.", "2023-05-09"),
        ("I start the course next Monday.", "Ana starts the course on 15 May 2023.", "2023-05-15"),
        (
            "I have been sick since last week.",
            "Ana has been sick since the week of 1 May 2023.",
            "2023-05-01",
        ),
        ("I saw a comet last night.", "Ana saw a comet on the night of 7 May 2023.", "2023-05-07"),
        ("The package arrives in five days.", "The package arrives on 13 May 2023.", "2023-05-13"),
        (
            "We fly home in two weeks.",
            "Ana and others fly home during the week of 22 May 2023.",
            "2023-05-22",
        ),
    ],
)
def test_relative_dates_become_absolute_in_text_and_temporal(
    text: str, expected: str, t_ref: str
) -> None:
    rec = one("Ana", text)
    assert rec.semantic_text == expected
    assert rec.temporal.t_ref == t_ref


def test_a_relative_phrase_at_sentence_start_is_capitalized() -> None:
    rec = one("Ana", "Last year I lived by the sea.")
    assert rec.semantic_text == "In 2022 Ana lived by the sea."


def test_a_relative_phrase_that_owns_something_keeps_it_without_a_preposition() -> None:
    """ "Last Sunday's loaf": the day is the loaf's, not when the sentence happened."""
    rec = one("Ana", "Last Sunday's loaf had a proper open crumb.")
    assert rec.semantic_text.endswith("'s loaf had a proper open crumb.")
    assert not rec.semantic_text.startswith("On ")


def test_the_first_date_of_the_sentence_is_t_ref() -> None:
    rec = one("Ana", "I met Bruno yesterday and we fly out next Monday.")
    assert (
        rec.semantic_text
        == "Ana met Bruno on 7 May 2023 and Ana and others fly out on 15 May 2023."
    )
    assert rec.temporal.t_ref == "2023-05-07"


@pytest.mark.parametrize(
    ("text", "t_ref"),
    [
        ("The concert was on 8 May 2023.", "2023-05-08"),
        ("The concert was on May 8, 2023.", "2023-05-08"),
        ("The concert was on 2023-05-08.", "2023-05-08"),
        ("The festival opens in March 2024.", "2024-03"),
        ("The shop opened in 2019 near the station.", "2019"),
        ("The form says 31 February 2023 by mistake.", ""),
    ],
)
def test_explicit_dates_fill_t_ref_and_stay_in_the_text(text: str, t_ref: str) -> None:
    rec = one("Ana", text)
    assert rec.semantic_text == text
    assert rec.temporal.t_ref == t_ref


@pytest.mark.parametrize(
    ("text", "t_ref"),
    [
        ("The race is on Sunday, May 21st, at 7:30.", "2023-05-21"),
        ("The course starts on the 2nd of June.", "2023-06-02"),
        ("The fair ran from April 3 to April 9.", "2023-04-03"),
        ("The lease ended on December 30th.", "2022-12-30"),  # nearer than next December
        ("The form says February 30th by mistake.", ""),
        ("You may 2 times a day.", ""),  # "may", the verb
    ],
)
def test_a_day_named_without_its_year_takes_the_nearest_to_the_session(
    text: str, t_ref: str
) -> None:
    rec = one("Ana", text)
    assert rec.semantic_text == text
    assert rec.temporal.t_ref == t_ref


def test_without_a_session_date_relative_phrases_stay() -> None:
    rec = one("Ana", "I adopted a puppy yesterday.", date=None)
    assert rec.semantic_text == "Ana adopted a puppy yesterday."
    assert rec.temporal.t_ref == ""
    assert rec.created_at is None
    out = encode_extractive(segment(("Ana", "I adopted a puppy yesterday."), date=None))
    assert out.disambiguation_context == "Speakers: Ana."


def test_weekday_followed_by_its_own_date_is_not_rewritten() -> None:
    out = encode_extractive(segment(("Ana", "The race is on Sunday, May 19th, at 7:30 sharp.")))
    assert "on Sunday, May 19th" in out.records[0].semantic_text
    # the plain weekday still resolves against the session date (a Monday)
    out = encode_extractive(segment(("Ana", "I ran twelve kilometres on Sunday with Bruno.")))
    assert "on 7 May 2023" in out.records[0].semantic_text


@pytest.mark.parametrize(
    "text",
    [
        "I ate six custard tarts in one week.",
        "I finally finished the whole draft in two days.",
        "Last spring we walked the coast path in three days.",
        "We packed and moved in two days.",  # one subject, two verbs
        "I saved 1,000 dollars in 3 months.",  # a number's comma ends no clause
        "My sister ate six in one week.",
        "The new roof was done in three days.",
    ],
)
def test_in_n_days_in_a_clause_about_what_was_done_is_how_long_it_took(text: str) -> None:
    """Not a day ahead of when it is said: the record keeps the words and no date."""
    rec = one("Ana", text)
    assert "in " in rec.semantic_text and "May 2023" not in rec.semantic_text, rec.semantic_text
    assert rec.temporal.t_ref == ""


@pytest.mark.parametrize(
    ("text", "t_ref"),
    [
        ("The parcel I ordered arrives in five days.", "2023-05-13"),  # set for then
        ("I was told it ships in 3 days.", "2023-05-11"),  # a report, not a deed
        ("The interview I scheduled is in 2 days.", "2023-05-10"),
        ("My exam is in two days and I studied all night.", "2023-05-10"),  # another clause
        ("I need to pack, we leave in two days.", "2023-05-10"),  # "need" is no past tense
        ("I won't be around, the move is in 3 weeks.", "2023-05-29"),
        ("The essay I started is due in 3 days.", "2023-05-11"),
        ("I decided to quit in two weeks.", "2023-05-22"),
        ("I booked a trip to Japan in two weeks.", "2023-05-22"),
    ],
)
def test_in_n_days_said_of_what_is_set_for_then_is_a_day_ahead(text: str, t_ref: str) -> None:
    assert one("Ana", text).temporal.t_ref == t_ref


@pytest.mark.parametrize(
    ("text", "t_ref"),
    [
        ("I am flying to Lisbon on Sunday.", "2023-05-14"),  # under way for a coming day
        ("My sister is visiting on Saturday.", "2023-05-13"),
        ("See you on Friday.", "2023-05-12"),  # asked for a day
        ("Remind me on Tuesday about the rent.", "2023-05-09"),
        ("We are meeting the investors on Wednesday.", "2023-05-10"),
        ("Let us meet on Saturday.", "2023-05-13"),
        ("I was hiking on Sunday.", "2023-05-07"),  # in the past: the last one
        ("We went hiking on Friday and I am exhausted.", "2023-05-05"),
        ("What is interesting is that the server crashed on Sunday.", "2023-05-07"),
        ("My knee is aching since the fall on Saturday.", "2023-05-06"),
        ("I'm reading the report you sent me on Friday.", "2023-05-05"),
        ("She is recovering from the surgery she had on Tuesday.", "2023-05-02"),
        ("I'm meeting Ana, who arrived on Friday.", "2023-05-05"),
        ("Let's talk about what happened on Sunday.", "2023-05-07"),
        ("Remind me what we decided on Thursday.", "2023-05-04"),
    ],
)
def test_a_weekday_said_of_what_is_planned_or_asked_for_is_the_coming_one(
    text: str, t_ref: str
) -> None:
    assert resolve_dates(text, datetime(2023, 5, 8, 13, 56))[1] == t_ref


@pytest.mark.parametrize(
    ("said_on", "t_ref"),
    [
        (datetime(2023, 5, 11), "2023-05-19"),  # a Thursday: not tomorrow
        (datetime(2023, 5, 8), "2023-05-19"),  # a Monday: next week's, not this week's
        (datetime(2023, 5, 13), "2023-05-19"),  # a Saturday: the coming one
        (datetime(2023, 5, 19), "2023-05-26"),  # a Friday: a week on
        (datetime(2023, 5, 14), "2023-05-19"),  # a Sunday: the week after starts tomorrow
    ],
)
def test_next_friday_is_the_friday_of_the_next_week(said_on: datetime, t_ref: str) -> None:
    assert one("Ana", "I fly out next Friday.", date=said_on).temporal.t_ref == t_ref
