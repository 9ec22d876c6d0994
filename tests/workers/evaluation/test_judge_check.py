"""The judge's sanity check: the pairs it grades, and what a judge that misses one gets."""

from __future__ import annotations

from typing import Any

import openai

from tests.fakes.openai_server import Action, FakeOpenAI, status, text, valid
from tests.workers.conftest import Sleeps
from workers.evaluation.judge import LLMJudge
from workers.evaluation.judge_check import SANITY_PAIRS, check_judge
from workers.llm.calls import make_client

RIGHT = {(p.question, p.answer): p.correct for p in SANITY_PAIRS}


def answer_of(body: dict[str, Any]) -> tuple[str, str]:
    user = body["messages"][-1]["content"]
    question = user.split("Question: ")[-1].split("\n")[0]
    return question, user.split("Generated answer: ")[-1].split("\n")[0]


def label(correct: bool) -> Action:
    return valid({"reasoning": "checked", "label": "CORRECT" if correct else "WRONG"})


def judge(server: FakeOpenAI) -> tuple[LLMJudge, openai.AsyncOpenAI]:
    client = make_client(server.url, None, timeout_s=5.0)
    policy = LLMJudge.policy.with_(max_attempts=1)
    return LLMJudge(client, "judge-m", policy=policy, sleep=Sleeps()), client


def test_sanity_pairs_hold_each_kind_of_answer_once_named() -> None:
    names = [p.name for p in SANITY_PAIRS]
    assert len(names) == len(set(names))
    assert sum(p.correct for p in SANITY_PAIRS) >= 4
    wrong = [p.answer for p in SANITY_PAIRS if not p.correct]
    assert "" in wrong and any(a.startswith("no answer:") for a in wrong)
    assert any(p.answer == p.question for p in SANITY_PAIRS)


async def test_a_sound_judge_passes_the_check() -> None:
    with FakeOpenAI(respond=lambda body: label(RIGHT[answer_of(body)])) as server:
        j, client = judge(server)
        check = await check_judge(j)
        await client.close()
    assert check.passed and check.pairs == len(SANITY_PAIRS) == len(server.requests)
    assert check.line() == f"judge judge-m: sanity check {check.pairs}/{check.pairs}, passed"


async def test_a_lenient_judge_fails_and_the_pairs_it_missed_are_named() -> None:
    with FakeOpenAI(respond=lambda body: label(True)) as server:
        j, client = judge(server)
        check = await check_judge(j)
        await client.close()
    wrong = [p.name for p in SANITY_PAIRS if not p.correct]
    assert not check.passed and [m.name for m in check.missed] == wrong
    assert all(m.verdict is True and m.expected is False for m in check.missed)
    assert "FAILED: another name (judged CORRECT)" in check.line()
    assert check.as_dict()["missed"][0]["name"] == "another name"


async def test_a_judge_without_verdicts_fails_the_check() -> None:
    def replies(body: dict[str, Any]) -> Action:
        question, answer = answer_of(body)
        if answer == "":
            return status(400, {})
        if answer == question:
            return text("CORRECT or WRONG? WRONG")  # free text is no verdict
        return label(RIGHT[(question, answer)])

    with FakeOpenAI(respond=replies) as server:
        j, client = judge(server)
        check = await check_judge(j)
        await client.close()
    missed = {m.name: m for m in check.missed}
    assert set(missed) == {"empty answer", "copies the question"}
    assert missed["empty answer"].verdict is None and "HTTP 400" in missed["empty answer"].why
    assert "no verdict in the reply" in missed["copies the question"].why
    assert "copies the question (no verdict)" in check.line()
