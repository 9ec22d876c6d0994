"""How the benchmarks that grade answers (`bench llm`, `bench locomo --answer`) judge them:
the judge endpoint (by default the configured LLM itself, or another one named on the
command line), its sanity check before any verdict counts, and the grading, in which a
failed answer is wrong and never reaches the judge."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streams.bench.errors import BenchError
from streams.factories import llm_caller_options
from streams.settings import Settings
from workers.evaluation.judge import LLMJudge, Verdict
from workers.evaluation.judge_check import JudgeCheck, check_judge
from workers.llm.calls import make_client


@dataclass(frozen=True)
class JudgeTarget:
    base_url: str
    model: str
    api_key: str | None = None


def judge_target(settings: Settings, base_url: str | None, model: str | None) -> JudgeTarget:
    """The judge named on the command line, each part defaulting to the configured LLM's."""
    url = base_url or settings.llm.base_url
    name = model or settings.llm.model
    if not url or not name:
        raise BenchError(
            "judging answers needs a judge model: set LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL, "
            "or give --judge-base-url and --judge-model"
        )
    key = settings.llm.api_key.get_secret_value() if settings.llm.api_key else None
    return JudgeTarget(url, name, key)


def make_judge(settings: Settings, at: JudgeTarget) -> LLMJudge:
    client = make_client(at.base_url, at.api_key, settings.llm.timeout_s)
    return LLMJudge(client, at.model, **llm_caller_options(settings, LLMJudge.policy))


@dataclass(frozen=True)
class Answered:
    """A question's answer to grade: `answer` None when it failed, `failure` saying why."""

    question: str
    gold: str
    answer: str | None
    failure: str | None = None


def answered(question: str, gold: str, answer: str | None, error: str | None) -> Answered:
    """A reply's answer as it came back: no answer, or an empty one, is a failure."""
    if answer is None or not answer.strip():
        return Answered(question, gold, None, error or "the answer is empty")
    return Answered(question, gold, answer)


async def grade(judge: LLMJudge, item: Answered) -> Verdict:
    """The judge's verdict on a generated answer; a failed answer is wrong and never judged."""
    if item.answer is None:
        return Verdict.of_failed_answer(item.failure or "no answer")
    return await judge.locomo(item.question, item.gold, item.answer)


async def grade_all(
    judge: LLMJudge, items: Sequence[Answered], concurrency: int = 4
) -> list[Verdict]:
    """`grade` over `items`, in order, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Answered) -> Verdict:
        async with gate:
            return await grade(judge, item)

    return list(await asyncio.gather(*(one(item) for item in items)))


async def proven_judge(
    settings: Settings, at: JudgeTarget, echo: Callable[[str], None]
) -> tuple[LLMJudge | None, JudgeCheck]:
    """The judge and its sanity check (`workers.evaluation.judge_check`), said by `echo`;
    None in place of a judge that failed it: its verdicts would not count."""
    judge = make_judge(settings, at)
    check = await check_judge(judge)
    echo(check.line())
    return (judge if check.passed else None), check


def unproven_note(check: JudgeCheck) -> str:
    """Why a run reports no accuracy: the pairs its judge failed."""
    return f"no accuracy: the judge failed its sanity check, so answers are not judged ({check.line()})"
