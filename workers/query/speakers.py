"""Whose words an item reports: a question about a person is answered by what they said.

In a conversation between two people, a question that names one of them ("What activities
does Lea do?") is answered by that person's own turns far more often than by the other's
replies about them. Selection takes ASIDE from the relevance of an item none of whose turns
an asked person said, so the other speaker's replies ("That sounds fun, Lea!") stop taking
the places the asked person's turns should have. ASIDE was chosen on LoCoMo's dev split with
each conversation held back (docs/notes/issue25.md, round 13).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from workers.query.planner.wording import named_people
from workers.query.selection import Candidate

ASIDE = 0.3  # of relevance, which selection min-max scales to [0, 1] over its pool

Turn = tuple[str, str]  # (session_id, turn_id)
SaidBy = Callable[[Iterable[Turn]], Mapping[Turn, str]]


def asked_people(route_speakers: Sequence[str], speakers: Iterable[str]) -> frozenset[str]:
    """The conversation's `speakers` the routes are about: a route's person matches a
    speaker's whole or first name."""
    known = sorted(set(speakers))
    return frozenset(p for s in route_speakers for p in named_people(s, known))


class Aside:
    """For each candidate, ASIDE if none of its turns was said by an asked person, else 0.

    `said_by` looks up who said which turns (the turns table); a candidate whose turns are
    not found, or have no speaker, is not aside: what cannot be told is not demoted.
    """

    def __init__(self, asked: frozenset[str], said_by: SaidBy, known: Mapping[Turn, str]) -> None:
        self.asked = asked
        self._said_by = said_by
        self._said: dict[Turn, str] = dict(known)

    def __call__(self, candidates: Sequence[Candidate]) -> np.ndarray:
        turns = [[(c.session_id, t) for t in c.turn_ids] for c in candidates]
        missing = {t for ts in turns for t in ts if t not in self._said}
        if missing:
            self._said.update(self._said_by(missing))
            self._said.update((t, "") for t in missing - self._said.keys())
        aside = [bool(ts) and all(self._aside(t) for t in ts) for ts in turns]
        return ASIDE * np.asarray(aside, dtype=np.float64)

    def _aside(self, turn: Turn) -> bool:
        said = self._said[turn]
        return bool(said) and said not in self.asked


def aside_for(
    route_speakers: Sequence[str | None], said_by: SaidBy, pool: Sequence[Candidate]
) -> Aside | None:
    """The request's `Aside`, or None unless every route is about a person and one of them
    said turns of `pool` (the items selection reads first): a route about no one may look
    for anyone's words."""
    named = [s for s in route_speakers if s]
    if not named or len(named) < len(route_speakers):
        return None
    turns = {(c.session_id, t) for c in pool for t in c.turn_ids}
    said = said_by(turns)
    asked = asked_people(named, said.values())
    return Aside(asked, said_by, {t: said.get(t, "") for t in turns}) if asked else None
