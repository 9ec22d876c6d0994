"""The retrieval plan of a question (DESIGN §8.1, paper §3.5 and App. C.4).

One planning step (an LLM call, or the heuristic planner without one) turns a question
into a question type, semantic queries, an optional temporal filter and one or more
evidence routes. Everything after the plan is non-generative recall over these fields.

These models enforce the caps (16 queries, 8 routes, 8 queries per route): whoever
builds a plan from a looser source (an LLM reply) truncates before constructing them.
"""

from __future__ import annotations

import calendar
import re
from datetime import date
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_QUERIES = 16
MAX_ROUTES = 8
MAX_ROUTE_QUERIES = 8

_ISO_PARTIAL = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")


class QuestionType(StrEnum):
    """The form of the question; it selects retrieval budgets, not benchmark categories."""

    single = "single"
    aggregate = "aggregate"
    temporal = "temporal"
    comparison = "comparison"
    personalized_advice = "personalized_advice"
    prior_assistant_response = "prior_assistant_response"
    other = "other"


def date_bounds(value: str) -> tuple[date, date]:
    """First and last day covered by an ISO date of any precision (YYYY, YYYY-MM, YYYY-MM-DD).

    Raises ValueError for anything else, including impossible dates such as 2023-02-30.
    """
    m = _ISO_PARTIAL.fullmatch(value)
    if m is None:
        raise ValueError(f"expected YYYY, YYYY-MM or YYYY-MM-DD (got {value!r})")
    year = int(m.group(1))
    if year < 1:
        raise ValueError(f"year out of range (got {value!r})")
    if m.group(3) is not None:
        day = date(year, int(m.group(2)), int(m.group(3)))
        return day, day
    if m.group(2) is not None:
        month = int(m.group(2))
        if not 1 <= month <= 12:
            raise ValueError(f"month out of range (got {value!r})")
        return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    return date(year, 1, 1), date(year, 12, 31)


def _check_iso(value: str) -> str:
    if value:
        date_bounds(value)
    return value


IsoDate = Annotated[str, AfterValidator(_check_iso)]


def _check_query(value: str) -> str:
    if not value.strip():
        raise ValueError("a query must not be blank")
    return value


Query = Annotated[str, AfterValidator(_check_query)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TemporalFilter(_Frozen):
    """Inclusive date bounds; an empty side is open. `until` may not end before `since`."""

    since: IsoDate = ""
    until: IsoDate = ""

    @model_validator(mode="after")
    def _ordered(self) -> TemporalFilter:
        if self.since and self.until and date_bounds(self.since)[0] > date_bounds(self.until)[1]:
            raise ValueError(f"since {self.since} is after until {self.until}")
        return self

    @property
    def start(self) -> date | None:
        """First day allowed, or None when open."""
        return date_bounds(self.since)[0] if self.since else None

    @property
    def end(self) -> date | None:
        """Last day allowed, or None when open."""
        return date_bounds(self.until)[1] if self.until else None

    def overlaps(self, value: str) -> bool:
        """Whether any day of an ISO date of any precision (YYYY, YYYY-MM, YYYY-MM-DD) lies
        inside the filter."""
        first, last = date_bounds(value)
        start, end = self.start, self.end
        return (start is None or last >= start) and (end is None or first <= end)


class Route(_Frozen):
    """One evidence need: a goal, the queries that look for it, optional filters."""

    goal: str
    queries: list[Query] = Field(min_length=1, max_length=MAX_ROUTE_QUERIES)
    constraints: list[str] = Field(default_factory=list)
    temporal_filter: TemporalFilter | None = None
    speaker: str | None = None


class Plan(_Frozen):
    """What the recall stage executes; `source` says whether an LLM or the heuristic made it."""

    question_type: QuestionType
    semantic_queries: list[Query] = Field(min_length=1, max_length=MAX_QUERIES)
    temporal_filter: TemporalFilter | None = None
    evidence_target: str = ""
    evidence_constraints: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    routes: list[Route] = Field(min_length=1, max_length=MAX_ROUTES)
    source: Literal["llm", "heuristic"]
