"""The planner without an LLM (DESIGN §8.2): a plan from the wording alone."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.plan import MAX_QUERIES, MAX_ROUTE_QUERIES, MAX_ROUTES, Plan, QuestionType, Route
from schemas.records import TokenUsage
from workers.query.planner.dates import temporal_filter_of
from workers.query.planner.wording import (
    about_the_history,
    compared_items,
    history_topic,
    joined_questions,
    key_phrase,
    named_people,
    normalized,
    noun_phrases,
    question_type_of,
    speaker_of,
    tokens,
    unique_queries,
    without_items,
)
from workers.vocabulary import QUESTION_STOPWORDS


def _unnamed(queries: list[str], names: Sequence[str]) -> list[str]:
    """A route's variants without those that are only a name the question gives (the first,
    the question itself, stays). A name alone finds the person's records, not what is asked
    about them: the records name their speakers (the encoder writes the name for "I" and
    "you"), so its vector draws every record of that person, and the other variants and
    the route's speaker constraint carry the name already."""
    drop = {normalized(n) for n in names}
    return [q for i, q in enumerate(queries) if i == 0 or normalized(q) not in drop]


def _restated(key: str, phrases: Sequence[str], topic: str = "") -> list[str]:
    """The question without its question words, as a query of its own when it says more than
    the phrases that follow it (a word they leave out). When it says nothing more, it is the
    question's own vector again, and fusion would count the question's matches twice over
    what its phrases find ("Ana go sailing in May" beside "Ana go sailing"; the
    date is the temporal filter's). A history question's topic is always kept."""
    said = {w.casefold() for p in phrases for w in p.split()}
    more = {w.casefold() for p in noun_phrases(key, limit=None) for w in p.split()} - said
    return [key] if topic or more else []


def _within(items: list[str], topic: str) -> list[str]:
    """A history question's compared items in its topic's words: the request's frame around
    them ("progress across" in "my garden and shed progress across our chats") is no part of
    either item, and would be searched with each."""
    words = {w.casefold() for w in topic.split()}
    kept = [" ".join(w for w in item.split() if w.casefold() in words) for item in items]
    kept = [k for k in dict.fromkeys(kept) if k]
    return kept if len(kept) >= 2 else []


def _focus_queries(item: str, others: Sequence[str], key: str) -> list[str]:
    focused = without_items(key, others)
    if normalized(item) not in normalized(focused):
        focused = f"{item} {focused}"
    content = [
        t.text
        for t in tokens(focused)
        if t.is_word and t.date_span is None and t.text.lower() not in QUESTION_STOPWORDS
    ]
    return unique_queries([focused, " ".join(content), item, key], MAX_ROUTE_QUERIES)


def heuristic_plan(question: str, speakers: Sequence[str] = ()) -> Plan:
    """A plan from the wording alone (DESIGN §8.2): deterministic, no model, no I/O.

    One route per compared item ("tea or coffee") in a comparison, else one per named
    speaker when two or more are named, else one per question of a coordinated question
    ("where ... and who ..."), else a single route.
    """
    question = " ".join(question.split())
    if not question:
        raise ValueError("the question is blank")
    qtype = question_type_of(question)
    names = named_people(question, speakers)
    topic = history_topic(question) if about_the_history(question) else ""
    key = topic or key_phrase(question)
    phrases = noun_phrases(topic or question)
    base = unique_queries([question, *_restated(key, phrases, topic), *phrases], MAX_QUERIES)
    items = compared_items(question) if qtype is QuestionType.comparison else []
    if topic:
        items = _within(items, topic)
    if len(items) < 2:
        items = names if len(names) >= 2 else []

    routes: list[Route] = []
    only = names[0] if len(names) == 1 else None
    for item in items[:MAX_ROUTES]:
        others = [o for o in items if o != item]
        speaker = speaker_of(item, names) or only
        routes.append(
            Route(
                goal=f"Evidence about {item} for: {question}",
                queries=_unnamed(_focus_queries(item, others, key), names),
                constraints=[f"speaker: {speaker}"] if speaker else [],
                speaker=speaker,
            )
        )
    asked = joined_questions(question, names) if not routes else [question]
    for part in asked if len(asked) > 1 else []:
        part_phrases = noun_phrases(part)
        part_queries = [part, *_restated(key_phrase(part), part_phrases), *part_phrases]
        routes.append(
            Route(
                goal=f"Evidence needed to answer: {part}",
                queries=_unnamed(unique_queries(part_queries, MAX_ROUTE_QUERIES), names),
                constraints=[f"speaker: {only}"] if only else [],
                speaker=only,
            )
        )
    if not routes:
        routes.append(
            Route(
                goal=f"Evidence needed to answer: {question}",
                queries=_unnamed(base[:MAX_ROUTE_QUERIES], names),
                constraints=[f"speaker: {only}"] if only else [],
                speaker=only,
            )
        )
    window = temporal_filter_of(question)
    time_constraint = (
        [f"time: {window.since or '...'} to {window.until or '...'}"] if window else []
    )
    return Plan(
        question_type=qtype,
        semantic_queries=unique_queries(
            [*base, *(q for r in routes for q in r.queries)], MAX_QUERIES
        ),
        temporal_filter=window,
        evidence_target=key or question,
        evidence_constraints=[*names, *time_constraint],
        constraints=[*(f"entity: {n}" for n in names), *time_constraint],
        routes=routes,
        source="heuristic",
    )


class HeuristicPlanner:
    """The planner without an LLM (DESIGN §8.2)."""

    async def plan(self, question: str, speakers: Sequence[str] = ()) -> tuple[Plan, TokenUsage]:
        return heuristic_plan(question, speakers), TokenUsage()


def single_route_plan(question: str) -> Plan:
    """The no-planner ablation: one route whose only query is the question."""
    return Plan(
        question_type=QuestionType.single,
        semantic_queries=[question],
        temporal_filter=None,
        routes=[Route(goal=question, queries=[question])],
        source="heuristic",
    )
