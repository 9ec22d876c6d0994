"""The judge endpoint of the benchmarks that grade answers (`bench llm`, `bench locomo
--answer`): by default the configured LLM itself, or another one named on the command line."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from streams.bench.errors import BenchError
from streams.factories import llm_caller_options
from streams.settings import Settings
from workers.evaluation.judge import LLMJudge, Verdict
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


async def judge_locomo(
    judge: LLMJudge, items: Sequence[tuple[str, str, str]], concurrency: int = 4
) -> list[Verdict]:
    """Verdicts of (question, gold, answer) triples, in order, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(question: str, gold: str, answer: str) -> Verdict:
        async with gate:
            return await judge.locomo(question, gold, answer)

    return list(await asyncio.gather(*(one(*item) for item in items)))
