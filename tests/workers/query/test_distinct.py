"""A question about the whole history searched also without the words most turns hold."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from schemas import QueryRequest
from schemas.plan import MAX_ROUTE_QUERIES, Plan, QuestionType, Route
from tests.workers.builders import HASH_DIM, HashEmbedder, turn
from workers.query.distinct import Shares, without_common
from workers.query.presets import SERVED
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

QUESTION = "Can you summarize how I fixed the security bugs of my garden app?"
COMMON = {"garden": 0.6, "app": 0.9, "my": 0.0}


def plan(*queries: str) -> Plan:
    route = Route(goal="g", queries=list(queries))
    return Plan(
        question_type=QuestionType.single,
        semantic_queries=list(queries),
        routes=[route],
        source="heuristic",
    )


def shares_of(table: Mapping[str, float]) -> Shares:
    def shares(words: Sequence[str]) -> dict[str, float]:
        return {w: table.get(w, 0.1) for w in words}

    return shares


def queries(p: Plan) -> list[str]:
    return p.routes[0].queries


def test_the_topic_is_searched_also_without_the_words_most_turns_hold() -> None:
    out = without_common(plan(QUESTION, "fixed security bugs garden app"), shares_of(COMMON), 0.5)
    assert queries(out) == [QUESTION, "fixed security bugs garden app", "fixed security bugs"]
    # a route of one query: that query is its topic
    alone = without_common(plan("security bugs of my garden app"), shares_of(COMMON), 0.5)
    assert queries(alone)[-1] == "security bugs of my"


@pytest.mark.parametrize(
    ("topic", "at_least"),
    [
        ("fixed security bugs", 0.5),  # no word most turns hold
        ("garden app", 0.5),  # nothing left without them
        ("fixed security bugs garden app", 0.95),  # none that common
    ],
)
def test_a_route_is_searched_as_planned_when_nothing_or_everything_is_common(
    topic: str, at_least: float
) -> None:
    before = plan(QUESTION, topic)
    assert without_common(before, shares_of(COMMON), at_least) == before


def test_a_full_route_and_a_namespace_not_held_in_memory_are_left_as_planned() -> None:
    full = plan(QUESTION, "fixed security bugs garden app", *(f"q{i}" for i in range(6)))
    assert len(queries(full)) == MAX_ROUTE_QUERIES
    assert without_common(full, shares_of(COMMON), 0.5) == full
    some = plan(QUESTION, "fixed security bugs garden app")
    assert without_common(some, lambda words: None, 0.5) == some


TURNS = [
    "My garden app crashes when I open the calendar.",
    "The garden app needs a login page.",
    "I fixed the security bugs in the login form yesterday.",
    "Should the garden app store photos?",
]


def stored(tmp_path: Path, snapshot_rows: int) -> EvidenceStore:
    name, embedder = HashEmbedder.model_name, HashEmbedder()
    s = EvidenceStore(str(tmp_path / "db"), name, HASH_DIM, snapshot_rows=snapshot_rows)
    vectors = embedder.embed(TURNS)
    s.turns.upsert(
        [
            turn("p", f"t{i}", text, i).model_copy(
                update={"embedding": vectors[i].tolist(), "embedding_model": name}
            )
            for i, text in enumerate(TURNS)
        ]
    )
    return s


def test_a_words_share_is_the_fraction_of_turns_its_index_term_is_in(tmp_path: Path) -> None:
    shares = stored(tmp_path, 100_000).turns.shares("p", ["garden", "Security", "apps", "kiwi"])
    assert shares == {"garden": 0.75, "Security": 0.25, "apps": 0.75, "kiwi": 0.0}  # stems
    assert stored(tmp_path / "big", 0).turns.shares("p", ["garden"]) is None


@pytest.mark.asyncio
async def test_the_service_searches_a_history_questions_topic_without_its_common_words(
    tmp_path: Path,
) -> None:
    store = stored(tmp_path, 100_000)
    ask = QueryRequest(
        correlation_id="c",
        namespace="p",
        query=QUESTION,
        k=3,
        reply_partition=0,
        deadline_ms=int((time.time() + 30) * 1000),
    )
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(ask)
    assert reply.plan is not None
    [route] = reply.plan["routes"]
    assert route["queries"][-1] == "fixed security bugs"
    off = replace(SERVED, common_share=0.0)
    planned = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(ask)
    assert planned.plan is not None
    assert "fixed security bugs" not in planned.plan["routes"][0]["queries"]
    # a question not about the history is searched as planned
    plain = ask.model_copy(update={"query": "How did I fix the security bugs of my garden app?"})
    served = await QueryService(QueryDeps(store, HashEmbedder())).search(plain)
    unchanged = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(plain)
    assert served.plan is not None and unchanged.plan is not None
    assert served.plan["routes"] == unchanged.plan["routes"]
