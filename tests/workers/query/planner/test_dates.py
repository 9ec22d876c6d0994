"""Explicit dates in a question become the plan's temporal filter; vague ones do not."""

from __future__ import annotations

import pytest

from schemas.plan import TemporalFilter
from workers.query.planner import heuristic_plan
from workers.query.planner.dates import temporal_filter_of


@pytest.mark.parametrize(
    ("question", "since", "until"),
    [
        ("What did Ana do on 8 May 2023?", "2023-05-08", "2023-05-08"),
        ("What did Ana do on May 8th, 2023?", "2023-05-08", "2023-05-08"),
        ("What did Bruno buy on 2023-05-08?", "2023-05-08", "2023-05-08"),
        ("What did Ana do in May 2023?", "2023-05", "2023-05"),
        ("Where did Bruno travel in 2022?", "2022", "2022"),
        ("What did Bruno read between March and June 2023?", "2023-03", "2023-06"),
        ("What did Ana cook from 3 to 9 May 2023?", "2023-05-03", "2023-05-09"),
        ("What did Ana do between 1 March 2023 and 5 June 2023?", "2023-03-01", "2023-06-05"),
        ("What did Bruno buy before 2023-05-08?", "", "2023-05-08"),
        ("What has Ana painted since June 2023?", "2023-06", ""),
        # a span before or after a day: that day included (where "last week" was said)
        ("What did Ana do the week before August 16, 2023?", "2023-08-09", "2023-08-16"),
        ("What did Bruno get two weeks before 11 Aug 2023?", "2023-07-28", "2023-08-11"),
        ("What did Ana see on the Sunday before November 16, 2022?", "2022-11-09", "2022-11-16"),
        ("Where did Bruno go two days after 5 May 2023?", "2023-05-05", "2023-05-07"),
        ("What did Ana do on the weekend of 1 May 2023?", "2023-05-01", "2023-05-01"),
    ],
)
def test_explicit_dates_become_a_temporal_filter(question: str, since: str, until: str) -> None:
    plan = heuristic_plan(question)
    assert plan.temporal_filter == TemporalFilter(since=since, until=until)


@pytest.mark.parametrize(
    "question",
    [
        "What did Ana do last week?",
        "What did Bruno say recently?",
        "What did Ana plan for May?",  # no year: not a concrete date
        "Did Bruno buy 2023 stickers?",  # a number, not a year
        "What did Ana do on 31 February 2023?",  # not a calendar day
    ],
)
def test_vague_or_impossible_dates_give_no_filter(question: str) -> None:
    assert temporal_filter_of(question) is None


def test_dates_stay_whole_in_key_phrases() -> None:
    plan = heuristic_plan("What did Ana do on 8 May 2023?")
    assert plan.evidence_target == "Ana on 8 May 2023"
    assert "2023" not in plan.semantic_queries  # no bare date fragments as queries
