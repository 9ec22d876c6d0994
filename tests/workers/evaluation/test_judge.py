"""The answer judges (paper App. E.4, E.5): their prompts, how verdicts are read, and the
judge model through the real `openai` client against the scripted loopback fake."""

from __future__ import annotations

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, status, text, valid
from tests.workers.conftest import Sleeps
from workers.evaluation.judge import (
    VERDICT_SCHEMA,
    YES_NO_SCHEMA,
    LLMJudge,
    accuracy_by_category,
    locomo_judge_messages,
    longmemeval_judge_messages,
    parse_locomo_verdict,
)


def judge(client: openai.AsyncOpenAI) -> LLMJudge:
    return LLMJudge(client, "judge-m", policy=LLMJudge.policy.with_(max_attempts=2), sleep=Sleeps())


def test_locomo_judge_prompt_carries_the_triple_the_generous_rules_and_the_json_fields() -> None:
    system, user = locomo_judge_messages("When did Ana move?", "May 2023", "in the spring of 2023")
    assert system["role"] == "system" and user["role"] == "user"
    body = user["content"]
    assert "Question: When did Ana move?" in body
    assert "Gold answer: May 2023" in body and "Generated answer: in the spring of 2023" in body
    assert "generously" in body and "same date or period" in body
    assert '"reasoning"' in body and '"label": "CORRECT" or "WRONG"' in body
    assert list(VERDICT_SCHEMA["properties"]) == ["reasoning", "label"]
    assert VERDICT_SCHEMA["properties"]["label"]["enum"] == ["CORRECT", "WRONG"]


@pytest.mark.parametrize(
    ("raw", "correct"),
    [
        ('{"reasoning": "same city", "label": "CORRECT"}', True),
        ('{"reasoning": "other city", "label": "wrong"}', False),
        ('```json\n{"label": "Correct"}\n```', True),
        ("It names another city, so the label is WRONG.", None),
        ("The generated answer is CORRECT as long as it is about the same thing", None),
        ('{"reasoning": "close enough", "label": "MOSTLY"}', None),
        ("I cannot tell.", None),
    ],
)
def test_locomo_verdict_is_read_from_its_json_object_only(raw: str, correct: bool | None) -> None:
    verdict, reasoning = parse_locomo_verdict(raw)
    assert verdict is correct
    if correct is None:
        assert reasoning.startswith("no verdict in the reply")


@pytest.mark.parametrize(
    ("task", "abstention", "needle"),
    [
        ("multi-session", False, "only part of what the answer requires deserves no"),
        ("temporal-reasoning", False, "off-by-one"),
        ("knowledge-update", False, "updated answer"),
        ("single-session-preference", False, "Rubric: "),
        ("single-session-user", True, "Explanation: "),
    ],
)
def test_longmemeval_judge_prompt_has_the_rules_of_its_task(
    task: str, abstention: bool, needle: str
) -> None:
    (message,) = longmemeval_judge_messages(
        task, "How many days?", "7 days", "a week", abstention=abstention
    )
    assert needle in message["content"]
    assert "Question: How many days?" in message["content"]
    assert "Model Response: a week" in message["content"]
    assert "Answer yes or no." in message["content"]
    assert message["content"].endswith('"verdict": "yes" or "no"}')


def test_accuracy_by_category_counts_no_verdict_as_judged_and_wrong() -> None:
    counts = accuracy_by_category(
        [("temporal", True), ("temporal", None), ("single-hop", False), ("single-hop", True)]
    )
    assert counts == {"all": (2, 4), "temporal": (1, 2), "single-hop": (1, 2)}


async def test_llm_judge_locomo_asks_for_the_verdict_schema_and_reads_the_label(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid({"reasoning": "same month", "label": "CORRECT"}))
    verdict = await judge(client).locomo("When?", "May 2023", "May 12, 2023")
    assert verdict.correct is True and verdict.reasoning == "same month"
    assert verdict.usage.calls == 1 and verdict.error is None
    body = server.requests[0]
    assert body["response_format"]["json_schema"]["schema"] == VERDICT_SCHEMA
    assert body["temperature"] == 0


async def test_llm_judge_unreachable_gives_no_verdict_with_the_reason(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(503, {}), status(503, {}))
    verdict = await judge(client).locomo("When?", "May 2023", "June")
    assert verdict.correct is None and "HTTP 503" in (verdict.error or "")


async def test_llm_judge_longmemeval_reads_the_verdict_of_its_json_object_only(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(
        valid({"reasoning": "one day off", "verdict": "Yes"}),
        valid({"reasoning": "another colour", "verdict": "no"}),
        text("Yes."),
    )
    j = judge(client)
    assert (await j.longmemeval("temporal-reasoning", "How long?", "7 days", "8 days")).correct
    assert (await j.longmemeval("multi-session", "Which?", "red", "blue")).correct is False
    assert (await j.longmemeval("multi-session", "Which?", "red", "yes")).correct is None
    body = server.requests[0]
    assert body["response_format"]["json_schema"]["schema"] == YES_NO_SCHEMA
