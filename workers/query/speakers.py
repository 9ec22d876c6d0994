"""Whose words an item reports: a question about a person is answered by what they said.

In a conversation between two people, a question that names one of them ("What activities
does Lea do?") is answered by that person's own turns far more often than by the other's
replies about them. Selection takes the query preset's `aside` from the relevance of an item
none of whose turns an asked person said, so the other speaker's replies ("That sounds fun,
Lea!") stop taking the places the asked person's turns should have.

In a conversation between a user and an assistant, the memory is asked on the user's
behalf: a question in the first person ("Which database did I choose?") is about the user,
and is answered by what the user said, not by the assistant's explanations around it. The
same `aside` is taken from an item none of whose turns the user said, unless the question
asks what the assistant said ("What did you recommend?").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from workers.query.planner.wording import named_people
from workers.query.selection import Candidate

Turn = tuple[str, str]  # (session_id, turn_id)
SaidBy = Callable[[Iterable[Turn]], Mapping[Turn, str]]
FIRST_PERSON = re.compile(r"\bI\b|\b[Mm](?:e|y|ine|yself)\b|\bI[’']")


def asked_people(route_speakers: Sequence[str], speakers: Iterable[str]) -> frozenset[str]:
    """The conversation's `speakers` the routes are about: a route's person matches a
    speaker's whole or first name."""
    known = sorted(set(speakers))
    return frozenset(p for s in route_speakers for p in named_people(s, known))


class Aside:
    """For each candidate, `aside` (of relevance, which selection min-max scales to [0, 1]
    over its pool) if none of its turns was said by an asked person, else 0.

    The asked people are the conversation's speakers the `named` route people match, among
    those who said the turns of the first pool asked about (selection's). `said_by` looks
    up who said which turns (the turns table), each turn once; a candidate whose turns are
    not found, or have no speaker, is not aside: what cannot be told is not demoted.
    """

    def __init__(self, named: Sequence[str], said_by: SaidBy, aside: float) -> None:
        self.named = named
        self.aside = aside
        self.asked: frozenset[str] | None = None  # known from the first pool
        self._said_by = said_by
        self._said: dict[Turn, str] = {}

    def __call__(self, candidates: Sequence[Candidate]) -> np.ndarray:
        turns = [[(c.session_id, t) for t in c.turn_ids] for c in candidates]
        missing = {t for ts in turns for t in ts if t not in self._said}
        if missing:
            found = self._said_by(missing)
            self._said.update((t, found.get(t, "")) for t in missing)
        if self.asked is None:
            self.asked = asked_people(self.named, (w for w in self._said.values() if w))
        asked, said = self.asked, self._said
        if not asked:  # the routes' people say none of these turns: nothing to tell apart
            return np.zeros(len(candidates))
        aside = [bool(ts) and all(said[t] and said[t] not in asked for t in ts) for ts in turns]
        return self.aside * np.asarray(aside, dtype=np.float64)


def aside_for(route_speakers: Sequence[str | None], said_by: SaidBy, aside: float) -> Aside | None:
    """The request's `Aside`, or None unless every route is about a person: a route about
    no one may look for anyone's words."""
    named = [s for s in route_speakers if s]
    if not named or len(named) < len(route_speakers):
        return None
    return Aside(named, said_by, aside)


class UserAside:
    """For each candidate, `aside` if none of its turns was said by the user role, else 0;
    nothing when the candidates' turns are all the user's (two people chatting, as users)."""

    def __init__(self, role_by: SaidBy, aside: float) -> None:
        self.aside = aside
        self._role_by = role_by
        self._role: dict[Turn, str] = {}

    def __call__(self, candidates: Sequence[Candidate]) -> np.ndarray:
        turns = [[(c.session_id, t) for t in c.turn_ids] for c in candidates]
        missing = {t for ts in turns for t in ts if t not in self._role}
        if missing:
            found = self._role_by(missing)
            self._role.update((t, found.get(t, "")) for t in missing)
        role = self._role
        aside = [bool(ts) and all(role[t] and role[t] != "user" for t in ts) for ts in turns]
        return self.aside * np.asarray(aside, dtype=np.float64)


def user_aside(
    question: str, asks_assistant: bool, role_by: SaidBy, aside: float
) -> UserAside | None:
    """The request's `UserAside` when it asks, in the first person, about the user."""
    if asks_assistant or not FIRST_PERSON.search(question):
        return None
    return UserAside(role_by, aside)
