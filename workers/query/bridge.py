"""A coordinated question's later part that refers back to what the earlier part asks about.

"What is the name of Ana's cat and who fed it while she was away?": the second part's "it"
is whatever the first part's answer names, and searching "who fed it ..." finds feeding in
general. Multi-hop retrieval's bridge step, without a model: the earlier part's best items
are read for the name that answers it (the new name in the sentence sharing most of its
words), the later part is searched again with that name in place of its pronoun.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable, Sequence

from schemas.plan import MAX_ROUTE_QUERIES, Plan, Route
from workers.query.planner.wording import joined_questions, named_people, tokens, unique_queries
from workers.query.selection import RouteRanking, by_head
from workers.store.fulltext import analyze

READ = 3  # items of the earlier part read for its answer
_BACK = re.compile(r"\b(?:it|its|them)\b", re.IGNORECASE)
_SPEAKER = re.compile(r"^[^\n:]{1,60}:\s+", re.MULTILINE)  # "Ana: ..." in a turn window
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_NOT_NAMES = frozenset({"i", "i'm", "i've", "i'll", "i'd", "ok"})


def refers_back(part: str) -> bool:
    """Whether a later part's object is a pronoun ("who fed it", "where did she put them")."""
    return bool(_BACK.search(part))


def bridges(question: str, routes: Sequence[Route]) -> list[tuple[int, int]]:
    """(earlier, later) route indexes where the later route searches a part of the question
    that refers back to the part the earlier one searches; routes of anything else (one per
    person named, per compared item) are never bridged."""
    question = " ".join(question.split())  # as the planner reads it
    parts = joined_questions(question, named_people(question))
    first = {r.queries[0]: i for i, r in enumerate(routes)}
    return [
        (first[earlier], first[later])
        for earlier, later in itertools.pairwise(parts)
        if earlier in first and later in first and refers_back(later)
    ]


def with_name(part: str, name: str) -> str:
    """The later part with its pronoun replaced by the name the earlier part's answer gives."""
    return _BACK.sub(lambda m: f"{name}'s" if m.group().lower() == "its" else name, part)


def answer_name(earlier: str, texts: Sequence[str]) -> str | None:
    """The name that answers `earlier` in the best items found for it, or None.

    Each sentence of the items (best item first) that names something the question does not
    is scored by the question's index terms it shares; of the best one (the earlier item and
    sentence on a tie), a new name holding some of those terms wins (the subject's own name:
    "the Harbour Ten Miler" for "the ten miler"), else its first new name ("I named it
    Biscuit, after my grandfather"). A sentence sharing nothing answers nothing.
    """
    asked = set(analyze(earlier))
    known = earlier.lower()
    best: tuple[int, str] | None = None
    for text in texts:
        for sentence in _SENTENCE.split(_SPEAKER.sub("", text)):
            names = [n for n in _names(sentence) if n.lower() not in known]
            shared = len(asked & set(analyze(sentence)))
            if names and shared and (best is None or shared > best[0]):
                own = [n for n in names if asked & set(analyze(n))]
                best = (shared, (own or names)[0])
    return best[1] if best else None


def _names(sentence: str) -> list[str]:
    """Runs of capitalized words that do not open the sentence ("... named it Biscuit")."""
    names: list[str] = []
    run: list[str] = []
    for tok in [*tokens(sentence), None]:
        if (
            tok is not None
            and tok.capitalized
            and not tok.sentence_start
            and tok.date_span is None
            and tok.text.lower() not in _NOT_NAMES
        ):
            run.append(re.sub(r"['’]s$", "", tok.text))
            continue
        if run:
            names.append(" ".join(run))
        run = []
    return names


async def bridged(
    question: str,
    plan: Plan,
    routes: list[RouteRanking],
    recall: Callable[..., Awaitable[list[RouteRanking]]],
) -> tuple[Plan, list[RouteRanking]]:
    """A later part of a coordinated question that refers back ("who fed it") searched again
    with the name the earlier part's best items give (`workers.query.bridge`), those items
    ranked last: they answer the earlier part, and what they do not say about the later one
    comes first, while their coverage of the question's routes stays whole. The plan in the
    reply shows the part as searched."""
    planned, ranked = list(plan.routes), list(routes)
    for earlier, later in bridges(question, planned):
        best = by_head(ranked[earlier].candidates)[:READ]
        name = answer_name(planned[earlier].queries[0], [c.text for c in best])
        if name is None:
            continue
        searched = [with_name(q, name) for q in planned[later].queries]
        route = planned[later].model_copy(
            update={"queries": unique_queries(searched, MAX_ROUTE_QUERIES)}
        )
        # every candidate kept, as for any route of several (its agreement counts)
        alone = plan.model_copy(update={"routes": [route]})
        (ranking,) = await recall(alone, route.queries[0], depth=None)
        read = {c.item_id for c in best}
        # those items last: the later part searches past them, and they still cover it
        kept = [c for c in ranking.candidates if c.item_id not in read]
        kept += [c for c in ranking.candidates if c.item_id in read]
        planned[later], ranked[later] = route, RouteRanking(ranked[later].route_id, kept)
    return plan.model_copy(update={"routes": planned}), ranked
