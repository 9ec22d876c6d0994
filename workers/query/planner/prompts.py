"""The planner's prompt and the model of its reply (paper App. E.2), like encoder/prompts.py.

The prompt is written in our own words with the paper's rules and JSON fields; the reply
models accept what models actually write (nulls, single strings, {"kind", "value"} items)
and `parse_plan_reply` turns a reply into a capped, validated `Plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from schemas.plan import (
    MAX_QUERIES,
    MAX_ROUTE_QUERIES,
    MAX_ROUTES,
    Plan,
    QuestionType,
    Route,
    TemporalFilter,
)
from workers.llm.formats import JsonSchema, reply_schema
from workers.llm.replies import json_object, reply_date, schema_errors
from workers.query.errors import PlanReplyError
from workers.query.planner.wording import speaker_of, unique_queries

PLANNER_SYSTEM_PROMPT = """\
You plan how to search a long memory of past conversations for the evidence a question \
needs. You do not answer the question: you describe what to look for.

## What you receive
- <USER_QUERY>: the question to plan for.
- <RECENT_CONTEXT>: the latest turns of the current conversation, possibly empty. Use them \
only to understand who or what the question refers to.

## Rules
1. Plan from the visible wording only. Never decide whether the answer exists, never guess \
it, and never put candidate answers (names, places, dates, objects not in the question) \
into the plan.
2. question_type is the form of the question:
   - single: an ordinary who/what/where/why/how question about one fact, event, \
preference, plan or object. This is the usual case, also for a question about one named \
person in a conversation between two people.
   - temporal: the answer needs a date, an approximate date, an order, a duration, a \
recurrence or a relative-time conversion.
   - comparison: the question directly compares two or more things on something other \
than time.
   - aggregate: the question asks for a count, a list, a set, a total or every matching item.
   - personalized_advice: the question asks for advice or a recommendation.
   - prior_assistant_response: the question asks what the assistant said earlier.
   - other: none of the above.
3. semantic_queries: 3 to 8 short, precise search phrases. Keep every name of a person, \
place or thing exactly as written, and never replace a named person with "the user". Put \
the named person together with the key verb or attribute in most queries, and add one or \
two paraphrases in the words people would likely have used in the conversation. Write \
them in the language of the question.
4. evidence_target: the one fact, event, detail or set the answer depends on. \
evidence_constraints: a few short conditions visible in the question (the person, the key \
predicate, the attribute asked for, an explicit time or status). Add no hidden requirements.
5. evidence_routes: one route by default, aimed at the person and predicate of the \
question. Use several routes only when the question needs separate evidence: two named \
people, two events or things being compared, the two endpoints of a duration, or a count \
or list over several members. Never split off helper routes for background, current \
state or candidate events. Each route has a short evidence_goal, 3 to 5 queries of its \
own, optional constraints, an optional temporal_filter and the speaker it is about (empty \
when none).
6. temporal_filter: only for a concrete date or an unambiguous range that can be written \
as YYYY-MM-DD (or YYYY-MM, YYYY). "on DATE" sets since and until to DATE; "before DATE" \
sets only until; "after DATE" or "since DATE" sets only since. Leave it empty ({}) for \
vague wording such as "recently", "earlier", "last week" or "next month".
7. Before replying, check that the plan is compact: merge the routes of a simple question \
about one person into one, add the right person's name to queries that could match \
someone else, and remove anything that guesses the answer.

## Output
Reply with one raw JSON object and nothing else (no markdown, no code fences):
{
  "reason": "one sentence: what is asked, the target, the search strategy",
  "question_type": "single | aggregate | temporal | comparison | personalized_advice | \
prior_assistant_response | other",
  "semantic_queries": ["search phrase"],
  "temporal_filter": {"since": "", "until": ""},
  "evidence_target": "",
  "evidence_constraints": ["short condition"],
  "constraints": ["kind: value"],
  "evidence_routes": [
    {
      "evidence_goal": "the evidence this route should find",
      "queries": ["route-specific search phrase"],
      "constraints": ["kind: value"],
      "temporal_filter": {},
      "speaker": ""
    }
  ]
}
"""

PLANNER_USER_TEMPLATE = """\
<USER_QUERY>
{question}
</USER_QUERY>

<RECENT_CONTEXT>
{recent_context}
</RECENT_CONTEXT>"""


def build_planner_messages(question: str, recent_context: str = "") -> list[dict[str, str]]:
    """[system, user]: the planning rules, then the question and the recent turns."""
    user = PLANNER_USER_TEMPLATE.format(
        question=question.strip(), recent_context=recent_context.strip()
    )
    return [
        {"role": "system", "content": PLANNER_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


# -- the reply -------------------------------------------------------------------------------


def _as_strings(v: Any) -> Any:
    """Lists of strings as a model writes them: null, one string, or {"kind", "value"} items."""
    if v is None:
        return []
    if not isinstance(v, list):
        v = [v]
    out: list[Any] = []
    for item in v:
        if isinstance(item, dict) and "value" in item:
            value = str(item.get("value") or "").strip()
            kind = str(item.get("kind") or "").strip()
            item = f"{kind}: {value}" if kind and value else value
        elif isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)
        if isinstance(item, str):
            item = " ".join(item.split())
            if not item:
                continue
        out.append(item)
    return out


def _as_text(v: Any) -> Any:
    return "" if v is None else " ".join(v.split()) if isinstance(v, str) else v


class _ReplyFilter(BaseModel):
    model_config = ConfigDict(extra="ignore")

    since: str = ""
    until: str = ""

    @field_validator("since", "until", mode="before")
    @classmethod
    def _date(cls, v: Any) -> Any:
        return reply_date(v)

    def to_filter(self) -> TemporalFilter | None:
        """None when both sides are empty; a ValidationError for a date that is not ISO."""
        return (
            TemporalFilter(since=self.since, until=self.until) if self.since or self.until else None
        )


def _as_filter(v: Any) -> Any:
    return None if v is None or v == "" or v == {} or v == [] else v


# fields as a model writes them, normalized before validation
_Strings = Annotated[list[str], BeforeValidator(_as_strings)]
_Text = Annotated[str, BeforeValidator(_as_text)]
_Filter = Annotated[_ReplyFilter | None, BeforeValidator(_as_filter)]


class _ReplyRoute(BaseModel):
    model_config = ConfigDict(extra="ignore")

    goal: _Text = Field(default="", validation_alias=AliasChoices("evidence_goal", "goal"))
    queries: _Strings = Field(default_factory=list)
    constraints: _Strings = Field(default_factory=list)
    temporal_filter: _Filter = None
    speaker: _Text = ""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reason: _Text = ""  # asked first, so that a constrained model states its plan before it
    question_type: QuestionType
    semantic_queries: _Strings = Field(default_factory=list)
    temporal_filter: _Filter = None
    evidence_target: _Text = ""
    evidence_constraints: _Strings = Field(default_factory=list)
    constraints: _Strings = Field(default_factory=list)
    routes: list[_ReplyRoute] = Field(
        default_factory=list, validation_alias=AliasChoices("evidence_routes", "routes")
    )

    @field_validator("routes", mode="before")
    @classmethod
    def _routes(cls, v: Any) -> Any:
        return [] if v is None else [v] if isinstance(v, dict) else v

    @field_validator("question_type", mode="before")
    @classmethod
    def _qtype(cls, v: Any) -> Any:
        # "Personalized advice" and "personalized-advice" are the same answer.
        return "_".join(v.strip().lower().replace("-", " ").split()) if isinstance(v, str) else v


def _bounded(schema: JsonSchema) -> JsonSchema:
    """Every list of the plan bounded (queries 8, routes 6, a route's queries 4, constraints
    4): a small model at temperature 0 can repeat a list item until its token cap (seen
    with Qwen2.5-Coder-1.5B: 1,700 tokens of plan). Validation caps them again."""
    props = schema["properties"]
    props["semantic_queries"]["maxItems"] = 8
    props["evidence_routes"]["maxItems"] = 6
    for name in ("evidence_constraints", "constraints"):
        props[name]["maxItems"] = 4
    route = props["evidence_routes"]["items"]["properties"]
    route["queries"]["maxItems"] = 4
    route["constraints"]["maxItems"] = 4
    return schema


PLAN_SCHEMA = _bounded(reply_schema(_Reply))
"""The plan reply's JSON schema (`response_format` json_schema)."""


def _route(reply: _ReplyRoute, speakers: Sequence[str]) -> Route | None:
    queries = unique_queries(reply.queries, MAX_ROUTE_QUERIES) or unique_queries([reply.goal], 1)
    if not queries:
        return None
    speaker = reply.speaker or speaker_of(" ".join([reply.goal, *queries]), speakers) or ""
    canonical = {s.casefold(): s for s in speakers}
    return Route(
        goal=reply.goal,
        queries=queries,
        constraints=reply.constraints,
        temporal_filter=reply.temporal_filter.to_filter() if reply.temporal_filter else None,
        speaker=canonical.get(speaker.casefold(), speaker) or None,
    )


def _decode(raw: str) -> dict[str, Any]:
    try:
        return json_object(raw)
    except ValueError as exc:
        raise PlanReplyError(str(exc)) from exc


def parse_plan_reply(raw: str, speakers: Sequence[str] = ()) -> Plan:
    """The plan in an LLM reply, with over-cap lists truncated and duplicate or blank queries
    dropped; PlanReplyError for invalid JSON, a schema violation or a plan without routes."""
    data = _decode(raw)
    try:
        reply = _Reply.model_validate(data)
        routes = [r for r in (_route(x, speakers) for x in reply.routes) if r is not None]
        if not routes:
            raise PlanReplyError("the plan has no usable evidence_routes")
        semantic = unique_queries(reply.semantic_queries, MAX_QUERIES) or unique_queries(
            (q for r in routes for q in r.queries), MAX_QUERIES
        )
        return Plan(
            question_type=reply.question_type,
            semantic_queries=semantic,
            temporal_filter=reply.temporal_filter.to_filter() if reply.temporal_filter else None,
            evidence_target=reply.evidence_target,
            evidence_constraints=reply.evidence_constraints,
            constraints=reply.constraints,
            routes=routes[:MAX_ROUTES],
            source="llm",
        )
    except ValidationError as exc:
        raise PlanReplyError(schema_errors(exc)) from exc
