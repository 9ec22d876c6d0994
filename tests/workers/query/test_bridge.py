"""The bridge from a coordinated question's earlier part to a later part that refers back."""

from __future__ import annotations

import pytest

from workers.query.bridge import answer_name, bridges, refers_back, with_name
from workers.query.planner.heuristic import heuristic_plan


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ("who fed it while Ana was away?", True),
        ("where did Ana put them?", True),
        ("what colour is its collar?", True),
        ("who did Ana travel with?", False),
        ("when did Ana visit Italy?", False),  # "it" inside a word is no pronoun
    ],
)
def test_a_part_refers_back_by_a_pronoun_for_a_thing(part: str, expected: bool) -> None:
    assert refers_back(part) is expected


def test_the_pronoun_is_replaced_by_the_name() -> None:
    assert with_name("who fed it while Ana was away?", "Biscuit") == (
        "who fed Biscuit while Ana was away?"
    )
    assert with_name("what colour is its collar?", "Biscuit") == "what colour is Biscuit's collar?"


def test_the_name_comes_from_the_sentence_sharing_the_most_words_with_the_part() -> None:
    texts = [
        "Bo: You should try the bakery on Elm Street. Ana: My puppy is finally home. "
        "I named him Biscuit, after my uncle.\nBo: Biscuit! Cute.",
        "Ana shared an image of a puppy on a red blanket.",
    ]
    # "Elm Street" comes first but shares nothing; "Ana" and "Bo" are asked or speak
    assert answer_name("What is the name of Ana's puppy?", texts) == "Biscuit"


def test_a_name_holding_the_parts_words_is_the_subjects_own_name() -> None:
    # "it" in "where does it start?" is the race itself: its name, not the first person named
    texts = ["Ana finally signed Ana and Bo up for the Harbour Ten Miler."]
    assert answer_name("When is the ten miler?", texts) == "Harbour Ten Miler"


def test_no_name_when_nothing_new_is_named_where_the_part_is_answered() -> None:
    assert answer_name("What did Ana buy?", ["Ana bought a red kayak."]) is None
    assert answer_name("What is the name of Ana's puppy?", ["We met Carl in Oslo."]) is None


def test_only_a_coordinated_questions_later_part_is_bridged() -> None:
    question = "What is the name of Ana's puppy and who walked it while she was away?"
    plan = heuristic_plan(question)
    assert bridges(question, plan.routes) == [(0, 1)]
    # one route per person named: "it" there is no later part's reference
    people = "Did Ana and Bo like it?"
    assert bridges(people, heuristic_plan(people).routes) == []
    alone = "Where did Ana put it?"
    assert bridges(alone, heuristic_plan(alone).routes) == []
