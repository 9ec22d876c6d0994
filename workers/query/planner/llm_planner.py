"""The LLM planner: one chat completion per question, the heuristic plan when it fails."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import structlog

from schemas.plan import Plan
from schemas.records import TokenUsage
from workers.llm.calls import ChatCaller
from workers.llm.errors import CompletionError
from workers.llm.replies import content
from workers.llm.usage import usage_of
from workers.query.errors import PlanReplyError
from workers.query.planner.heuristic import heuristic_plan
from workers.query.planner.prompts import (
    PLAN_SCHEMA,
    build_planner_messages,
    parse_plan_reply,
)

log = structlog.get_logger("lychee.planner")


class LLMPlanner(ChatCaller):
    """One chat completion per question (temperature 0, the plan's JSON schema), retried only on
    `is_retryable` errors with full-jitter backoff that honours Retry-After; any unusable
    outcome falls back to `heuristic_plan`, logged, never raised.

    A Retry-After longer than `max_delay_s` ends the attempts at once: a question waits
    for its plan, so the heuristic is better than a long sleep.
    """

    max_output_tokens = 2048  # a plan is a few hundred tokens

    def __init__(self, *args: Any, budget_s: float | None = None, **kwargs: Any) -> None:
        """`ChatCaller`'s arguments; `budget_s`: the longest wait for a plan (None: as long
        as the retry policy lets the calls run), the heuristic's plan after it."""
        super().__init__(*args, **kwargs)
        self.budget_s = budget_s

    async def plan(
        self, question: str, speakers: Sequence[str] = (), recent_context: str = ""
    ) -> tuple[Plan, TokenUsage]:
        """The LLM's plan, or the heuristic's with the reason logged; the usage of the call
        made (zeros when no completion came back). ValueError only for a blank question."""
        if not question.strip():
            raise ValueError("the question is blank")
        messages = build_planner_messages(question, recent_context)
        try:
            rng = self._rng or random.Random(question)
            call = self._call(messages, rng, PLAN_SCHEMA, "retrieval_plan")
            completion = await asyncio.wait_for(call, self.budget_s)
        except TimeoutError:
            reason = f"no plan within {self.budget_s:g}s (LYCHEE_QUERY_PLAN_TIMEOUT_S)"
            return self._fallback(question, speakers, reason, TokenUsage())
        except Exception as exc:  # the fallback is the contract: no error reaches the caller
            reason = (
                str(exc) if isinstance(exc, CompletionError) else f"{type(exc).__name__}: {exc}"
            )
            return self._fallback(question, speakers, reason, TokenUsage())
        usage = usage_of(completion, messages)
        try:
            return parse_plan_reply(content(completion), speakers), usage
        except PlanReplyError as exc:
            return self._fallback(question, speakers, exc.reason, usage)

    def _fallback(
        self, question: str, speakers: Sequence[str], reason: str, usage: TokenUsage
    ) -> tuple[Plan, TokenUsage]:
        log.warning("planner.fallback", model=self.model, reason=reason[:500])
        return heuristic_plan(question, speakers), usage
