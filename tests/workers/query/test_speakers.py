"""Whose words an item reports: the asked people and the items none of them said."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from workers.query.presets import SERVED
from workers.query.selection import Candidate
from workers.query.speakers import Aside, Turn, aside_for, asked_people, user_aside

ASIDE = SERVED.aside

SAID = {("s1", "t1"): "Lea Costa", ("s1", "t2"): "Omar", ("s2", "t1"): "Omar"}


def item(*turns: str, session: str = "s1") -> Candidate:
    return Candidate(f"{session}/{'+'.join(turns)}", "record", "x", session, tuple(turns))


class Lookups:
    def __init__(self) -> None:
        self.asked: list[set[Turn]] = []

    def __call__(self, turns: Iterable[Turn]) -> dict[Turn, str]:
        wanted = set(turns)
        self.asked.append(wanted)
        return {t: SAID[t] for t in wanted if t in SAID}


def test_a_route_names_a_speaker_by_whole_or_first_name() -> None:
    speakers = ["Lea Costa", "Omar"]
    assert asked_people(["Lea"], speakers) == {"Lea Costa"}
    assert asked_people(["Lea Costa", "Omar"], speakers) == {"Lea Costa", "Omar"}
    assert asked_people(["Lisbon"], speakers) == frozenset()


def test_an_item_is_aside_when_none_of_its_turns_an_asked_person_said() -> None:
    aside = Aside(["Lea"], Lookups(), ASIDE)
    got = aside([item("t1"), item("t2"), item("t1", "t2"), item("t1", session="s2")])
    # Lea's turn; Omar's; a window of both; a session where t1 is Omar's
    assert got.tolist() == [0.0, ASIDE, 0.0, ASIDE]
    assert aside.asked == {"Lea Costa"}


def test_what_cannot_be_told_is_not_demoted() -> None:
    aside = Aside(["Lea"], Lookups(), ASIDE)
    assert aside([item("t1"), item("t9"), item("t2", "t9"), item()]).tolist() == [
        0.0,
        0.0,
        0.0,
        0.0,
    ]


def test_turns_are_looked_up_once() -> None:
    lookups = Lookups()
    aside = Aside(["Omar"], lookups, ASIDE)
    aside([item("t1"), item("t2"), item("t9")])
    aside([item("t2"), item("t9"), item("t1", session="s2")])
    assert lookups.asked == [{("s1", "t1"), ("s1", "t2"), ("s1", "t9")}, {("s2", "t1")}]


def test_no_demotion_unless_every_route_is_about_a_speaker_of_the_pool() -> None:
    pool = [item("t1"), item("t2")]
    assert aside_for(["Lea", None], Lookups(), ASIDE) is None  # a route about no one
    assert aside_for([], Lookups(), ASIDE) is None
    alone = aside_for(["Lisbon"], Lookups(), ASIDE)  # no speaker of these turns
    assert alone is not None and alone(pool).tolist() == [0.0, 0.0]
    assert alone.asked == frozenset()
    found = aside_for(["Lea", "Lisbon"], Lookups(), ASIDE)
    assert found is not None and np.array_equal(found(pool), [0.0, ASIDE])
    assert found.asked == {"Lea Costa"}


ROLES = {("s1", "t1"): "user", ("s1", "t2"): "assistant", ("s1", "t3"): "user"}


def roles(turns: Iterable[Turn]) -> dict[Turn, str]:
    return {t: ROLES[t] for t in turns if t in ROLES}


def test_a_first_person_question_puts_aside_what_the_user_did_not_say() -> None:
    aside = user_aside("Which database did I choose for my tracker?", False, roles, ASIDE)
    assert aside is not None
    got = aside([item("t1"), item("t2"), item("t2", "t3"), item("t9")])
    # the user's turn; the assistant's; a window with the user in it; unknown
    assert got.tolist() == [0.0, ASIDE, 0.0, 0.0]


def test_no_user_aside_for_a_question_about_the_assistant_or_about_no_one() -> None:
    assert user_aside("What did you recommend for my database?", True, roles, ASIDE) is None
    assert user_aside("Which database does Lea use?", False, roles, ASIDE) is None
    assert user_aside("What is important to me?", False, roles, ASIDE) is not None


def test_two_people_chatting_as_users_are_never_put_aside() -> None:
    aside = user_aside("What did I tell you about Lisbon?", False, lambda ts: {}, ASIDE)
    assert aside is not None and aside([item("t1"), item("t2")]).tolist() == [0.0, 0.0]
    users = user_aside("Where did I go?", False, lambda ts: dict.fromkeys(ts, "user"), ASIDE)
    assert users is not None and users([item("t1"), item("t2")]).tolist() == [0.0, 0.0]
