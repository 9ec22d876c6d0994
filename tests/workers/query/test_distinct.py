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
from workers.query.presets import ABLATIONS, SERVED
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

QUESTION = "Over our chats, in what order did the checkout and the newsletter of my bakery website come up?"
TOPIC = "checkout newsletter bakery website"
COMMON = {"bakery": 0.6, "website": 0.9}


def plan(*routes: list[str]) -> Plan:
    return Plan(
        question_type=QuestionType.single,
        semantic_queries=[q for r in routes for q in r][:8],
        routes=[Route(goal="g", queries=queries) for queries in routes],
        source="heuristic",
    )


def shares_of(table: Mapping[str, float]) -> Shares:
    def shares(words: Sequence[str]) -> dict[str, float]:
        return {w: table.get(w, 0.1) for w in words}

    return shares


def test_each_routes_topic_is_searched_also_without_the_words_most_turns_hold() -> None:
    three = plan([QUESTION, TOPIC], ["newsletter", "checkout newsletter"], ["website orders"])
    out = without_common(three, shares_of(COMMON), 0.5)
    assert [r.queries for r in out.routes] == [
        [QUESTION, TOPIC, "checkout newsletter"],  # its second query is its topic
        ["newsletter", "checkout newsletter"],  # nothing common in it
        ["website orders", "orders"],  # a route of one query: that one
    ]


@pytest.mark.parametrize(
    ("topic", "at_least"),
    [
        ("checkout newsletter", 0.5),  # no word most turns hold
        ("bakery website", 0.5),  # nothing left without them
        (TOPIC, 0.95),  # none that common
    ],
)
def test_a_plan_is_searched_as_planned_when_nothing_or_everything_is_common(
    topic: str, at_least: float
) -> None:
    before = plan([QUESTION, topic])
    assert without_common(before, shares_of(COMMON), at_least) == before


def test_a_full_route_and_a_namespace_not_held_in_memory_are_left_as_planned() -> None:
    full = plan([QUESTION, TOPIC, *(f"q{i}" for i in range(6))])
    assert len(full.routes[0].queries) == MAX_ROUTE_QUERIES
    assert without_common(full, shares_of(COMMON), 0.5) == full
    some = plan([QUESTION, TOPIC])
    assert without_common(some, lambda words: None, 0.5) == some


def test_the_ablations_without_a_planner_search_no_topic_again() -> None:
    assert SERVED.common_share > 0
    assert ABLATIONS["no-planner"].common_share == ABLATIONS["record-vector-only"].common_share == 0


TURNS = [
    "I launched my bakery website on Monday.",
    "The website needs a checkout for cake orders.",
    "Can the bakery website send a monthly newsletter?",
    "My sourdough starter doubled overnight.",
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


def test_a_words_share_is_the_fraction_of_turns_its_index_terms_are_in(tmp_path: Path) -> None:
    words = ["website", "Checkout", "websites", "bakery-website", "kiwi", "the"]
    shares = stored(tmp_path, 100_000).turns.shares("p", words)
    assert shares == {
        "website": 0.75,
        "Checkout": 0.25,
        "websites": 0.75,  # the same stem
        "bakery-website": 0.5,  # its rarest term's
        "kiwi": 0.0,
        "the": 0.0,  # a stop word has no term
    }
    assert stored(tmp_path / "large", 0).turns.shares("p", ["website"]) is None


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
    assert [r["queries"][-1] for r in reply.plan["routes"]] == ["checkout newsletter come"]
    off = replace(SERVED, common_share=0.0)
    planned = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(ask)
    assert planned.plan is not None
    assert "checkout newsletter come" not in planned.plan["routes"][0]["queries"]
    # a question not about the history is searched as planned
    plain = ask.model_copy(update={"query": "How does the checkout of my bakery website work?"})
    served = await QueryService(QueryDeps(store, HashEmbedder())).search(plain)
    unchanged = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(plain)
    assert served.plan is not None and unchanged.plan is not None
    assert served.plan["routes"] == unchanged.plan["routes"]
