"""Query planning (DESIGN §8.1-8.2): one LLM call, or a deterministic heuristic without one.

The plan is the only generative step at query time (paper §3.5, App. C.4): a question
type, semantic queries, an optional temporal filter and the evidence routes that the
non-generative recall executes. `wording` and `dates` read the question, `heuristic`
plans from them, `prompts` holds the LLM prompt with its reply model, and `llm_planner`
makes the call, falling back to the heuristic plan whenever the reply is unusable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from schemas.plan import Plan
from schemas.records import TokenUsage
from workers.query.planner.heuristic import HeuristicPlanner, heuristic_plan, single_route_plan

__all__ = ["HeuristicPlanner", "Planner", "heuristic_plan", "single_route_plan"]


class Planner(Protocol):
    async def plan(
        self, question: str, speakers: Sequence[str] = ()
    ) -> tuple[Plan, TokenUsage]: ...
