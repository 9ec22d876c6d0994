"""The LLM planner through the real `openai` client against the scripted loopback fake:
the prompt, the reply parsing and the fallback to the heuristic plan."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from schemas.plan import MAX_ROUTE_QUERIES, MAX_ROUTES, QuestionType, TemporalFilter
from tests.fakes.openai_server import FakeOpenAI, slow, status, text, valid
from tests.workers.conftest import Sleeps
from workers.query.errors import PlanReplyError
from workers.query.planner import heuristic_plan
from workers.query.planner.llm_planner import LLMPlanner
from workers.query.planner.prompts import (
    PLAN_SCHEMA,
    PLANNER_SYSTEM_PROMPT,
    build_planner_messages,
    parse_plan_reply,
)

MODEL = "fake-planner"
SPEAKERS = ("Ana", "Bruno")


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
    json_mode = kw.pop("json_mode", None)
    policy = LLMPlanner.policy.with_(**kw)
    return LLMPlanner(client, MODEL, policy=policy, json_mode=json_mode, sleep=sleeps or Sleeps())


async def test_llm_plan_valid_reply_streams_at_temperature_zero_with_plan_schema_and_counts_usage(
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
    assert body["stream"] is True and body["max_completion_tokens"] == 2048
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "retrieval_plan", "schema": PLAN_SCHEMA, "strict": True},
    }
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


async def test_llm_plan_not_back_within_its_budget_falls_back_to_the_heuristic(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    """A model busy with the encoder's long prompts holds a plan for minutes: the question
    gets the heuristic plan after the budget, not a timeout."""
    server.script(slow(5.0, valid(plan_reply())))
    question = "Where did Ana move?"
    quick = LLMPlanner(client, MODEL, policy=LLMPlanner.policy, sleep=Sleeps(), budget_s=0.3)

    plan, usage = await asyncio.wait_for(quick.plan(question, SPEAKERS), 3.0)

    assert plan == heuristic_plan(question, SPEAKERS) and usage.calls == 0


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
