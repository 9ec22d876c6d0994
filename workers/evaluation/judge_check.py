"""A judge proves itself before its verdicts count: a fixed set of graded pairs.

A grader that labels everything CORRECT (a small model told to "grade generously", or one
that echoes the prompt) yields an accuracy figure that a refused request or an empty answer
raises. So before a judged run the judge grades `SANITY_PAIRS`, whose right verdicts are
known: right answers in other words, wrong answers on the same subject, an empty answer,
error strings, an answer that copies the question and a vague one. A judge that gets any
wrong is not used, and the run says which pairs it failed. The pairs are written for this
project, about invented people, and hold nothing of any benchmark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workers.evaluation.judge import LLMJudge, Verdict


@dataclass(frozen=True)
class SanityPair:
    """A question, its gold answer, an answer to grade and the verdict a sound judge gives."""

    name: str
    question: str
    gold: str
    answer: str
    correct: bool


_PET = "What is the name of Lena's dog?"
_MOVE = "When did Rafael move to Porto?"
_COUNT = "How many sisters does Nadia have?"
_JOB = "What does Omar do for a living?"
_HOBBY = "Which instrument is Maya learning?"

SANITY_PAIRS: tuple[SanityPair, ...] = (
    # right answers in other words
    SanityPair("same name, in a sentence", _PET, "Pepper", "Her dog is called Pepper.", True),
    SanityPair("same month, another format", _MOVE, "March 2021", "In 03/2021", True),
    SanityPair("same number, in digits", _COUNT, "two", "Nadia has 2 sisters", True),
    SanityPair("same job, other words", _JOB, "nurse", "He works as a nurse in a hospital", True),
    SanityPair(
        "same thing, longer", _HOBBY, "the cello", "She has been taking cello lessons", True
    ),
    # wrong answers on the same subject
    SanityPair("another name", _PET, "Pepper", "Her dog is called Biscuit.", False),
    SanityPair("another year", _MOVE, "March 2021", "In March 2019", False),
    SanityPair("another number", _COUNT, "two", "Nadia has five sisters", False),
    SanityPair("another job", _JOB, "nurse", "He is a school teacher", False),
    SanityPair("another instrument", _HOBBY, "the cello", "She is learning the violin", False),
    SanityPair("the topic, not the answer", _HOBBY, "the cello", "She talked about music", False),
    # answers that are not answers
    SanityPair("empty answer", _PET, "Pepper", "", False),
    SanityPair(
        "error: refused",
        _MOVE,
        "March 2021",
        "no answer: the LLM server refused the request: HTTP 400",
        False,
    ),
    SanityPair("error: timed out", _JOB, "nurse", "Error: the request timed out", False),
    SanityPair("abstention", _COUNT, "two", "I don't know.", False),
    SanityPair("copies the question", _HOBBY, "the cello", _HOBBY, False),
)


@dataclass(frozen=True)
class Miss:
    """A pair the judge graded wrong, or could not grade (`verdict` None, `why` says why)."""

    name: str
    expected: bool
    verdict: bool | None
    why: str


@dataclass(frozen=True)
class JudgeCheck:
    """The judge's grades on the sanity pairs: it passed when it missed none."""

    judge: str
    pairs: int
    missed: tuple[Miss, ...]

    @property
    def passed(self) -> bool:
        return not self.missed

    def line(self) -> str:
        """One line for every accuracy figure: the judge and how it did on the pairs."""
        head = f"judge {self.judge}: sanity check {self.pairs - len(self.missed)}/{self.pairs}"
        if self.passed:
            return f"{head}, passed"
        names = "; ".join(f"{m.name} ({_said(m)})" for m in self.missed)
        return f"{head}, FAILED: {names}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "passed": self.passed,
            "pairs": self.pairs,
            "missed": [
                {"name": m.name, "expected": m.expected, "verdict": m.verdict, "why": m.why}
                for m in self.missed
            ],
        }


def _said(miss: Miss) -> str:
    if miss.verdict is None:
        return "no verdict"
    return "judged CORRECT" if miss.verdict else "judged WRONG"


async def check_judge(
    judge: LLMJudge, pairs: Sequence[SanityPair] = SANITY_PAIRS, concurrency: int = 4
) -> JudgeCheck:
    """The judge's grades on `pairs`, `concurrency` calls at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(pair: SanityPair) -> Verdict:
        async with gate:
            return await judge.locomo(pair.question, pair.gold, pair.answer)

    verdicts = await asyncio.gather(*(one(p) for p in pairs))
    missed = tuple(
        Miss(p.name, p.correct, v.correct, v.error or v.reasoning[:200])
        for p, v in zip(pairs, verdicts, strict=True)
        if v.correct is not p.correct
    )
    return JudgeCheck(judge.model, len(pairs), missed)
