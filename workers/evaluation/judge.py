"""Answer judges with an LLM (DESIGN §11.3, paper App. E.4 and E.5).

LoCoMo's protocol: a grader model labels each generated answer CORRECT or WRONG against
the gold answer, generously (the same topic, or the same date or period in any format,
counts), with one sentence of reasoning first; accuracy is the share labelled CORRECT.
LongMemEval's judges answer yes or no, with one rule set per task (temporal reasoning
forgives off-by-one day counts, knowledge updates accept old facts beside the updated one,
preferences are graded against a rubric, abstention questions want the gap recognised).
The prompts are written in our own words with the paper's rules and output fields; both
verdicts come back as a JSON object in a schema, and a reply without one is no verdict.
A judge proves itself first on `workers.evaluation.judge_check`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from schemas.records import TokenUsage
from workers.llm.calls import ChatCaller
from workers.llm.errors import CompletionError
from workers.llm.formats import reply_schema
from workers.llm.replies import content, json_object, schema_errors
from workers.llm.usage import usage_of

# --- LoCoMo (App. E.5) ---------------------------------------------------------------

LOCOMO_JUDGE_SYSTEM = "You are a careful grader who decides whether answers match a gold answer."

LOCOMO_JUDGE_USER = """\
Label a generated answer to a question CORRECT or WRONG. You are given:
1. a question that one person asks another about their earlier conversations,
2. the gold answer, which is the ground truth,
3. the generated answer you grade.

The question checks something one person should remember about the other from those \
conversations. The gold answer is usually short and names the topic, for example:
Question: Which instrument did I start learning last winter?
Gold answer: The cello

Grade generously. The generated answer may be much longer than the gold one: as long as \
it is about the same thing as the gold answer, it is CORRECT.

When the question is about time, the gold answer is a date, a month, a year or a period. \
The generated answer may be longer or use relative references ("the week before the \
wedding"): as long as it points to the same date or period as the gold answer, it is \
CORRECT, whatever its format.

The question to grade:
Question: {question}
Gold answer: {gold}
Generated answer: {answer}

First give your reasoning in one short sentence, then the label CORRECT or WRONG.
Reply with JSON only:
{{"reasoning": "<one short sentence>", "label": "CORRECT" or "WRONG"}}"""


class LocomoVerdict(BaseModel):
    """The grader's reply; the reasoning comes first so that the label follows from it."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    label: Literal["CORRECT", "WRONG"]

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, v: Any) -> Any:
        return v.strip().upper() if isinstance(v, str) else v


VERDICT_SCHEMA = reply_schema(LocomoVerdict)


def locomo_judge_messages(question: str, gold: str, answer: str) -> list[dict[str, str]]:
    user = LOCOMO_JUDGE_USER.format(question=question.strip(), gold=gold.strip(), answer=answer)
    return [
        {"role": "system", "content": LOCOMO_JUDGE_SYSTEM},
        {"role": "user", "content": user},
    ]


def parse_locomo_verdict(raw: str) -> tuple[bool | None, str]:
    """(correct, reasoning) from the verdict's JSON object; correct is None, with the reason,
    for a reply that is not that object. A label is never read from free text: a reply that
    echoes the prompt holds both labels and proves nothing."""
    try:
        verdict = LocomoVerdict.model_validate(json_object(raw))
    except ValueError as exc:  # ValidationError included
        detail = schema_errors(exc) if isinstance(exc, ValidationError) else str(exc)
        return None, f"no verdict in the reply ({detail}): {raw.strip()[:200]!r}"
    return verdict.label == "CORRECT", verdict.reasoning


# --- LongMemEval (App. E.4) ----------------------------------------------------------

LongMemEvalTask = Literal[
    "single-session-user",
    "single-session-assistant",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-preference",
]

_LME_BASE = (
    "Below are a question, its correct answer and a model's response. Answer yes if the "
    "response contains the correct answer, and no otherwise. A response that is equivalent "
    "to the correct answer, or that goes through every intermediate step needed to reach it, "
    "also deserves yes. A response that holds only part of what the answer requires deserves no."
)
_LME_RULES: dict[str, str] = {
    "temporal-reasoning": _LME_BASE
    + " Do not penalise an off-by-one error in a number of days: when the question asks how "
    "many days, weeks, months or the like, a response that is off by one is still correct.",
    "knowledge-update": "Below are a question, its correct answer and a model's response. "
    "Answer yes if the response contains the correct answer, and no otherwise. A response "
    "that mentions earlier information beside the updated answer is still correct, as long as "
    "the updated answer is the one it gives.",
    "single-session-preference": "Below are a question, a rubric describing the personalised "
    "response wanted, and a model's response. Answer yes if the response satisfies the "
    "rubric, and no otherwise. It need not cover every point of the rubric: it is correct as "
    "long as it recalls and uses the user's personal information correctly.",
}
_LME_ABSTENTION = (
    "Below are a question that cannot be answered, an explanation of why, and a model's "
    "response. Answer yes if the model recognises that the question cannot be answered: it "
    "may say that the information is incomplete, or that some other information is known but "
    "not the information asked for."
)


class YesNoVerdict(BaseModel):
    """A LongMemEval grader's reply: the reasoning, then yes or no."""

    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    verdict: Literal["yes", "no"]

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


YES_NO_SCHEMA = reply_schema(YesNoVerdict)
_YES_NO_REPLY = (
    'Reply with JSON only: {"reasoning": "<one short sentence>", "verdict": "yes" or "no"}'
)


def parse_yes_no_verdict(raw: str) -> tuple[bool | None, str]:
    """(yes, reasoning) from the verdict's JSON object; None, with the reason, otherwise."""
    try:
        verdict = YesNoVerdict.model_validate(json_object(raw))
    except ValueError as exc:  # ValidationError included
        detail = schema_errors(exc) if isinstance(exc, ValidationError) else str(exc)
        return None, f"no verdict in the reply ({detail}): {raw.strip()[:200]!r}"
    return verdict.verdict == "yes", verdict.reasoning


def longmemeval_judge_messages(
    task: str, question: str, answer: str, response: str, *, abstention: bool = False
) -> list[dict[str, str]]:
    """One user message in the layout of LongMemEval's `get_anscheck_prompt`, asking for
    the verdict as JSON."""
    if abstention:
        rules, label, ask = (
            _LME_ABSTENTION,
            "Explanation",
            "Does the model recognise the question as unanswerable? Answer yes or no.",
        )
    else:
        rules = _LME_RULES.get(task, _LME_BASE)
        label = "Rubric" if task == "single-session-preference" else "Correct Answer"
        ask = "Is the model response correct? Answer yes or no."
    text = (
        f"{rules}\n\nQuestion: {question.strip()}\n\n{label}: {answer.strip()}\n\n"
        f"Model Response: {response.strip()}\n\n{ask}\n{_YES_NO_REPLY}"
    )
    return [{"role": "user", "content": text}]


# --- the judge -----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One graded answer: `correct` is None when the judge gave no usable label (or no
    reply: `error` says why); such answers count as wrong and are reported apart. An answer
    that failed (`failed` says why) is never judged: it is wrong."""

    correct: bool | None
    reasoning: str
    usage: TokenUsage
    error: str | None = None
    failed: str | None = None

    @classmethod
    def of_failed_answer(cls, reason: str) -> Verdict:
        return cls(False, "", TokenUsage(), failed=reason)


class LLMJudge(ChatCaller):
    """The grader model: temperature 0, the verdict read from a reply in its JSON schema
    (a label for LoCoMo, yes or no for LongMemEval), never from free text. `name` is the
    judge model, reported beside every accuracy."""

    max_output_tokens = 1024  # one sentence and a label, with room for a model that reasons

    async def locomo(self, question: str, gold: str, answer: str) -> Verdict:
        messages = locomo_judge_messages(question, gold, answer)
        rng = self._rng or random.Random(question)
        try:
            completion = await self._call(messages, rng, VERDICT_SCHEMA, "verdict")
        except CompletionError as err:
            return Verdict(None, "", TokenUsage(), error=err.reason)
        correct, reasoning = parse_locomo_verdict(content(completion))
        return Verdict(correct, reasoning, usage_of(completion, messages))

    async def longmemeval(
        self, task: str, question: str, answer: str, response: str, *, abstention: bool = False
    ) -> Verdict:
        messages = longmemeval_judge_messages(
            task, question, answer, response, abstention=abstention
        )
        rng = self._rng or random.Random(question)
        try:
            completion = await self._call(messages, rng, YES_NO_SCHEMA, "verdict")
        except CompletionError as err:
            return Verdict(None, "", TokenUsage(), error=err.reason)
        correct, reasoning = parse_yes_no_verdict(content(completion))
        return Verdict(correct, reasoning, usage_of(completion, messages))


def accuracy_by_category(judged: Iterable[tuple[str, bool | None]]) -> dict[str, tuple[int, int]]:
    """(correct, judged) overall ("all") and per category, in order of first appearance;
    an answer without a usable verdict counts as judged and wrong."""
    out: dict[str, tuple[int, int]] = {"all": (0, 0)}
    for category, correct in judged:
        for key in ("all", category):
            right, n = out.get(key, (0, 0))
            out[key] = (right + bool(correct), n + 1)
    return out
