"""The query planner (DESIGN §8.1-8.2): the heuristic, the plan contract, and the LLM
planner through the real `openai` client against the scripted loopback fake."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import openai
import pytest
from pydantic import ValidationError

from schemas.plan import (
    MAX_QUERIES,
    MAX_ROUTE_QUERIES,
    MAX_ROUTES,
    Plan,
    QuestionType,
    Route,
    TemporalFilter,
)
from tests.fakes.openai_server import FakeOpenAI, status, text, valid
from tests.workers.conftest import Sleeps
from workers.query.planner import (
    PLANNER_SYSTEM_PROMPT,
    LLMPlanner,
    PlanReplyError,
    build_planner_messages,
    heuristic_plan,
    parse_plan_reply,
    temporal_filter_of,
    unique_queries,
)

MODEL = "fake-planner"
SPEAKERS = ("Ana", "Bruno")

# --- the heuristic: question types ------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Ana move to the new flat?", QuestionType.temporal),
        ("What date was the concert Bruno went to?", QuestionType.temporal),
        ("How long ago did Ana start painting?", QuestionType.temporal),
        ("Which year did Bruno finish school?", QuestionType.temporal),
        ("Did Ana adopt the cat before the move?", QuestionType.temporal),
        ("Did Bruno start running after the surgery?", QuestionType.temporal),
        ("Can you compare the two laptops Ana looked at?", QuestionType.comparison),
        ("Do Ana and Bruno both play the piano?", QuestionType.comparison),
        ("What is the difference between the gym and the pool?", QuestionType.comparison),
        ("Did Ana prefer tea or coffee?", QuestionType.comparison),
        ("Does Bruno read more than Ana?", QuestionType.comparison),
        ("How many books did Ana read?", QuestionType.aggregate),
        ("List the cities Bruno visited.", QuestionType.aggregate),
        ("What are all the pets Ana owns?", QuestionType.aggregate),
        ("Which instruments have Bruno played?", QuestionType.aggregate),
        ("Can you recommend a podcast for my commute?", QuestionType.personalized_advice),
        ("What should I cook for dinner tonight?", QuestionType.personalized_advice),
        ("Any advice on my morning routine?", QuestionType.personalized_advice),
        ("What was the restaurant you recommended to me?", QuestionType.prior_assistant_response),
        ("Remind me what you said about the hiking boots.", QuestionType.prior_assistant_response),
        ("Did you mention a stretching routine?", QuestionType.prior_assistant_response),
        ("What is Ana's favourite colour?", QuestionType.single),
        ("Where does Bruno work?", QuestionType.single),
    ],
)
def test_heuristic_question_type_from_wording(question: str, expected: QuestionType) -> None:
    plan = heuristic_plan(question)
    assert plan.question_type is expected
    assert plan.source == "heuristic"


# --- the heuristic: routes -------------------------------------------------------------


def test_two_named_speakers_get_one_route_each() -> None:
    plan = heuristic_plan("What do Ana and Bruno like to cook?", SPEAKERS)

    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]
    ana, bruno = plan.routes
    assert ana.queries[0] == "Ana like to cook"
    assert bruno.queries[0] == "Bruno like to cook"
    assert all("Bruno" not in q for q in ana.queries[:3])
    assert "speaker: Ana" in ana.constraints


def test_speakers_are_found_without_a_speaker_list_too() -> None:
    plan = heuristic_plan("What hobbies did Ana share with Bruno?")
    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]


def test_one_named_speaker_gives_one_route_with_that_speaker() -> None:
    plan = heuristic_plan("Where did Ana go to Lisbon from?", SPEAKERS)
    assert len(plan.routes) == 1
    assert plan.routes[0].speaker == "Ana"


def test_a_place_after_a_preposition_is_not_a_second_person() -> None:
    plan = heuristic_plan("Why did Ana move to Lisbon?")
    assert len(plan.routes) == 1
    assert plan.routes[0].speaker == "Ana"


def test_comparison_x_or_y_gets_one_route_per_item() -> None:
    plan = heuristic_plan("Which did Ana enjoy more, the hiking trip or the cooking class?")

    assert plan.question_type is QuestionType.comparison
    assert [r.queries[0] for r in plan.routes] == [
        "Ana enjoy more the hiking trip",
        "Ana enjoy more the cooking class",
    ]
    assert [r.speaker for r in plan.routes] == ["Ana", "Ana"]
    assert "cooking" not in plan.routes[0].queries[0]


def test_comparison_between_two_speakers_sets_each_routes_speaker() -> None:
    plan = heuristic_plan("Who is older, Ana or Bruno?", SPEAKERS)
    assert [r.speaker for r in plan.routes] == ["Ana", "Bruno"]
    assert plan.routes[0].queries[0] == "older Ana"


def test_single_question_gets_one_route_with_the_question_and_key_phrases() -> None:
    plan = heuristic_plan("What kind of car does Bruno drive?", SPEAKERS)

    assert len(plan.routes) == 1
    assert plan.semantic_queries == [
        "What kind of car does Bruno drive?",
        "kind of car Bruno drive",  # the key phrase: no question words or auxiliaries
        "car",  # runs of content words
        "Bruno drive",
    ]
    assert plan.routes[0].queries == plan.semantic_queries
    assert plan.routes[0].speaker == "Bruno"
    assert plan.temporal_filter is None


# --- the heuristic: dates --------------------------------------------------------------


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
    assert "Ana on 8 May 2023" in plan.semantic_queries
    assert "2023" not in plan.semantic_queries  # no bare date fragments as queries


# --- the heuristic: queries ------------------------------------------------------------


def test_queries_are_deduped_case_insensitively_and_capped() -> None:
    assert unique_queries(["Ana", " ana ", "ANA", "Bruno  runs", "bruno runs", ""], 5) == [
        "Ana",
        "Bruno runs",
    ]
    assert unique_queries([f"q{i}" for i in range(40)], 16) == [f"q{i}" for i in range(16)]


def test_heuristic_plan_respects_the_caps_and_has_no_duplicates() -> None:
    names = [f"Name{chr(65 + i)}" for i in range(12)]
    question = "What do " + ", ".join(names) + " and Zed like?"
    plan = heuristic_plan(question, [*names, "Zed"])

    assert len(plan.routes) == MAX_ROUTES
    assert len(plan.semantic_queries) <= MAX_QUERIES
    assert all(len(r.queries) <= MAX_ROUTE_QUERIES for r in plan.routes)
    folded = [" ".join(q.casefold().split()) for q in plan.semantic_queries]
    assert len(folded) == len(set(folded))


def test_heuristic_plan_is_deterministic() -> None:
    question = "Did Ana prefer tea or coffee on 8 May 2023?"
    plans = [heuristic_plan(question, SPEAKERS).model_dump_json() for _ in range(3)]
    assert len(set(plans)) == 1


def test_blank_question_is_refused() -> None:
    with pytest.raises(ValueError):
        heuristic_plan("   ")


# --- the contract ----------------------------------------------------------------------


def test_temporal_filter_validates_iso_dates_and_order() -> None:
    window = TemporalFilter(since="2023-02", until="2023")
    assert (window.start, window.end) == (date(2023, 2, 1), date(2023, 12, 31))
    for bad in ({"since": "May 2023"}, {"until": "2023-13"}, {"since": "2023-02-30"}):
        with pytest.raises(ValidationError):
            TemporalFilter(**bad)
    with pytest.raises(ValidationError):
        TemporalFilter(since="2023-06", until="2023-05-31")


@pytest.mark.parametrize(
    ("since", "until", "inside", "outside"),
    [
        ("", "", ["1999", "2023-05", "2030-01-01"], []),
        ("2023-05-08", "2023-05-08", ["2023", "2023-05", "2023-05-08"], ["2023-05-09", "2023-04"]),
        ("2023-05", "", ["2023", "2023-05-01", "2024-01"], ["2023-04-30", "2022"]),
        ("", "2023-05-31", ["2023-05", "2020"], ["2023-06-01", "2024"]),
    ],
)
def test_temporal_filter_overlaps_dates_of_every_precision(
    since: str, until: str, inside: list[str], outside: list[str]
) -> None:
    window = TemporalFilter(since=since, until=until)
    assert [v for v in inside if window.overlaps(v)] == inside
    assert [v for v in outside if window.overlaps(v)] == []


def test_models_enforce_caps_and_forbid_unknown_fields() -> None:
    route = Route(goal="g", queries=["q"])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=[f"q{i}" for i in range(MAX_ROUTE_QUERIES + 1)])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=[])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=["  "])
    base: dict[str, Any] = {
        "question_type": "single",
        "semantic_queries": ["q"],
        "routes": [route],
        "source": "llm",
    }
    assert Plan(**base).temporal_filter is None
    with pytest.raises(ValidationError):
        Plan(**(base | {"semantic_queries": [f"q{i}" for i in range(MAX_QUERIES + 1)]}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"routes": [route] * (MAX_ROUTES + 1)}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"extra": 1}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"source": "other"}))


# --- the LLM planner -------------------------------------------------------------------


def plan_reply(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "reason": "asks where Ana moved",
        "question_type": "single",
        "semantic_queries": ["Ana moved to", "Ana new city", "Ana relocation"],
        "temporal_filter": {},
        "evidence_target": "the city Ana moved to",
        "evidence_constraints": ["Ana", "moved"],
        "constraints": [{"kind": "entity", "value": "Ana"}],
        "evidence_routes": [
            {
                "route_id": "r1",
                "evidence_goal": "where Ana moved",
                "queries": ["Ana moved to", "Ana moving city"],
                "constraints": [{"kind": "entity", "value": "Ana"}],
                "temporal_filter": {},
            }
        ],
    }
    return base | over


def planner(client: openai.AsyncOpenAI, sleeps: Sleeps | None = None, **kw: Any) -> LLMPlanner:
    return LLMPlanner(client, MODEL, sleep=sleeps or Sleeps(), **kw)


async def test_llm_plan_valid_reply_sends_temperature_zero_json_mode_and_counts_usage(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid(plan_reply()))

    plan, usage = await planner(client).plan("Where did Ana move?", SPEAKERS, "Ana: hi")

    assert plan.source == "llm"
    assert plan.question_type is QuestionType.single
    assert plan.semantic_queries == ["Ana moved to", "Ana new city", "Ana relocation"]
    assert plan.temporal_filter is None
    assert plan.constraints == ["entity: Ana"]
    (route,) = plan.routes
    assert route.goal == "where Ana moved"
    assert route.queries == ["Ana moved to", "Ana moving city"]
    assert route.speaker == "Ana"  # inferred: the one speaker the route names
    assert route.temporal_filter is None

    (body,) = server.requests
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0] == {"role": "system", "content": PLANNER_SYSTEM_PROMPT}
    assert "Where did Ana move?" in body["messages"][1]["content"]
    assert "Ana: hi" in body["messages"][1]["content"]

    (served,) = server.usages
    assert usage.input_tokens == served["prompt_tokens"]
    assert usage.output_tokens == served["completion_tokens"]
    assert usage.calls == 1 and not usage.estimated and usage.prompt_tokens > 0


async def test_llm_plan_keeps_filters_and_normalizes_loose_fields(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(
        valid(
            plan_reply(
                question_type="Prior Assistant Response",
                temporal_filter={"since": "2023-05-08T10:00:00", "until": None},
                evidence_routes=[
                    {
                        "goal": "what Bruno was told",
                        "queries": "Bruno advice",
                        "temporal_filter": {"since": "2023-05", "until": "2023-06"},
                        "speaker": "bruno",
                    }
                ],
            )
        )
    )

    plan, _ = await planner(client).plan("What did you tell Bruno?", SPEAKERS)

    assert plan.question_type is QuestionType.prior_assistant_response
    assert plan.temporal_filter == TemporalFilter(since="2023-05-08")
    (route,) = plan.routes
    assert route.queries == ["Bruno advice"]
    assert route.temporal_filter == TemporalFilter(since="2023-05", until="2023-06")
    assert route.speaker == "Bruno"


async def test_llm_plan_over_the_caps_is_truncated_and_deduped(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    queries = [f"query {i}" for i in range(20)]
    routes = [
        {"evidence_goal": f"goal {r}", "queries": [f"route {r} q{i}" for i in range(12)]}
        for r in range(10)
    ]
    server.script(
        valid(plan_reply(semantic_queries=["QUERY 0", "  ", *queries], evidence_routes=routes))
    )

    plan, _ = await planner(client).plan("What do all the members like?")

    assert plan.source == "llm"
    assert plan.semantic_queries == ["QUERY 0", *queries[1:16]]
    assert len(plan.routes) == MAX_ROUTES == 8
    assert [r.goal for r in plan.routes] == [f"goal {r}" for r in range(8)]
    assert all(len(r.queries) == MAX_ROUTE_QUERIES == 8 for r in plan.routes)
    assert plan.routes[0].queries == [f"route 0 q{i}" for i in range(8)]


async def test_llm_plan_invalid_json_falls_back_to_the_heuristic(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("Sure! Here is the plan: question_type single"))
    question = "Do Ana and Bruno both like jazz?"

    plan, usage = await planner(client).plan(question, SPEAKERS)

    assert plan == heuristic_plan(question, SPEAKERS)
    assert plan.source == "heuristic"
    assert usage.calls == 1 and usage.input_tokens > 0  # the tokens were spent all the same
    assert len(server.requests) == 1  # no repair call


async def test_llm_plan_schema_violation_falls_back(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid(plan_reply(question_type="trivia")))
    plan, _ = await planner(client).plan("Where does Bruno work?", SPEAKERS)
    assert plan.source == "heuristic"
    assert plan.question_type is QuestionType.single


@pytest.mark.parametrize(
    "reply",
    [
        plan_reply(evidence_routes=[]),
        plan_reply(evidence_routes=[{"evidence_goal": "", "queries": ["", " "]}]),
        plan_reply(temporal_filter={"since": "last spring"}),
        plan_reply(semantic_queries=[{"nested": True}]),
        ["not", "an", "object"],
    ],
    ids=["no-routes", "empty-route", "bad-date", "bad-query", "not-an-object"],
)
async def test_llm_plan_unusable_replies_fall_back(
    server: FakeOpenAI, client: openai.AsyncOpenAI, reply: Any
) -> None:
    server.script(valid(reply))
    plan, _ = await planner(client).plan("Where does Bruno work?", SPEAKERS)
    assert plan.source == "heuristic"


async def test_llm_plan_server_errors_retry_then_fall_back(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(*[status(500, headers={})] * 3)
    sleeps = Sleeps()

    plan, usage = await planner(client, sleeps, max_attempts=3).plan("Where does Bruno work?")

    assert plan.source == "heuristic"
    assert usage.calls == 0 and usage.input_tokens == 0
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2  # between attempts, never after the last one


async def test_llm_plan_retries_honour_retry_after_then_succeed(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(429, {"Retry-After": "2"}), valid(plan_reply()))
    sleeps = Sleeps()

    plan, usage = await planner(client, sleeps).plan("Where did Ana move?")

    assert plan.source == "llm"
    assert sleeps.delays == [2.0]
    assert usage.calls == 1


async def test_llm_plan_client_errors_are_not_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(400, headers={}))
    sleeps = Sleeps()
    plan, _ = await planner(client, sleeps).plan("Where did Ana move?")
    assert plan.source == "heuristic"
    assert len(server.requests) == 1 and sleeps.delays == []


async def test_llm_plan_long_retry_after_gives_up_at_once(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(503, {"Retry-After": "120"}))
    sleeps = Sleeps()
    plan, _ = await planner(client, sleeps).plan("Where did Ana move?")
    assert plan.source == "heuristic"
    assert len(server.requests) == 1 and sleeps.delays == []


def test_prompt_contains_the_question_and_the_recent_context() -> None:
    messages = build_planner_messages("  Where did Ana move?  ", "Bruno: she moved last year")

    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == PLANNER_SYSTEM_PROMPT
    user = messages[1]["content"]
    assert "<USER_QUERY>\nWhere did Ana move?\n</USER_QUERY>" in user
    assert "<RECENT_CONTEXT>\nBruno: she moved last year\n</RECENT_CONTEXT>" in user
    for rule in ("evidence_routes", "temporal_filter", "3 to 8", "never guess"):
        assert rule in PLANNER_SYSTEM_PROMPT


def test_parse_plan_reply_tolerates_fences_and_prose() -> None:
    raw = "```json\n" + json.dumps(plan_reply()) + "\n```"
    assert parse_plan_reply(raw).source == "llm"
    assert parse_plan_reply("Plan: " + json.dumps(plan_reply()) + " done").source == "llm"
    with pytest.raises(PlanReplyError, match="empty"):
        parse_plan_reply("  ")
