"""Request/reply contracts of the query service (`memory.queries` -> `memory.replies`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.base import MAX_INT64, Contract, Name, Question
from schemas.exchange import Role

CORRELATION_ID_MAX_CHARS = 100
TOKEN_BUDGET_MIN = 64  # a smaller share of a prompt holds the two headings (18) and little else
TOKEN_BUDGET_MAX = 1_000_000
K_MAX = 200  # evidence items a request may ask for

# retrieval ablations, per request or as the service's default: the paper's (Table 5), then
# one per evidence-node type (what that type's rows add to recall, and so whether they earn
# their embeddings)
Ablation = Literal[
    "record-vector-only",
    "no-planner",
    "no-fusion",
    "no-entity-nodes",
    "no-topic-nodes",
    "no-entity-topic-nodes",
    "no-temporal-nodes",
    "no-event-frame-nodes",
]


class QueryRequest(Contract):
    """A retrieval request. The client reads replies on its own `reply_partition`."""

    latest_version: ClassVar[int] = 2  # 2: `token_budget`
    schema_version: int = 2
    kind: Literal["query"] = "query"
    correlation_id: str = Field(min_length=1, max_length=CORRELATION_ID_MAX_CHARS)
    namespace: Name
    query: Question
    k: int = Field(default=10, ge=1, le=K_MAX)
    session_id: Name | None = None
    reply_partition: int = Field(
        ge=0, le=1_000_000, description="checked against the reply topic by the query service"
    )
    deadline_ms: int = Field(
        gt=0,
        le=MAX_INT64,
        description="epoch milliseconds after which no reply is wanted; the query service "
        "refuses deadlines further ahead than its `query_max_deadline_s`",
    )
    answer: bool = False
    ablation: Ablation | None = Field(
        default=None, description="switch off a retrieval stage for this request (paper ablations)"
    )
    token_budget: int | None = Field(
        default=None,
        ge=TOKEN_BUDGET_MIN,
        le=TOKEN_BUDGET_MAX,
        description="the most tokens the reply's evidence may take in a prompt: it keeps, in "
        "order, each item whose `context` still fits (`context_tokens`, the two headings "
        "included), passing over one that would not; at most `k` items either way",
    )


class EvidenceItem(BaseModel):
    """One piece of evidence with its provenance and the scores that ranked it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["turn", "window", "record"] = Field(
        description="a memory record, a raw turn, or a window of neighbouring raw turns"
    )
    item_id: str
    text: str
    turn_ids: list[str]
    session_id: str
    speaker: str | None = None
    role: Role | None = None
    date: datetime | None = Field(default=None, description="conversation date of the source")
    resolved_date: str | None = Field(
        default=None, description="a record's resolved event date (YYYY[-MM[-DD]])"
    )
    memory_type: str | None = None
    context: str | None = Field(
        default=None,
        description="a record's context: the subject its neighbouring turns name, when its text "
        'leans on them ("it\'s on Sunday")',
    )
    span: tuple[int, int] | None = Field(
        default=None,
        description="a passage of a long turn: where it is in the turn's text (start, end); "
        "the whole turn is one `lychee records --turns` away",
    )
    span_turn_id: str | None = Field(
        default=None,
        description="the turn `span` is in: the item's own, or the long turn of a window",
    )
    routes: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(
        default_factory=dict,
        description="what ranked it: each channel's score and selection's `final`; the "
        "reply's order is the ranking (today's value or a standing instruction may come above "
        "an item selection scored higher)",
    )
    # what the item's records say about time and each other (`schemas.supersession`): empty
    # in replies of services that predate them
    superseded_by: list[str] = Field(
        default_factory=list, description="ids of later records that replace what this says"
    )
    supersedes: list[str] = Field(
        default_factory=list, description="ids of earlier records this replaces"
    )
    replaced_values: list[str] = Field(
        default_factory=list,
        description="what of the item later records replaced when not all of it: of a "
        "statement that gave several values, those replaced, as it says them, when it gives "
        "another they did not say changed; of a turn or window that says more than its "
        "replaced statements, each of those (its replaced values, else the statement) "
        "(empty: `superseded_by` replaced all of it, or nothing did)",
    )
    valid_from: str | None = Field(
        default=None,
        description="when what it says became current (YYYY-MM-DD): the date of the change "
        "by which it replaced an earlier statement, else the day it was said, not the date it "
        "speaks of; never after `valid_to` (unset when its links cannot tell)",
    )
    valid_to: str | None = Field(
        default=None, description="when a later statement replaced it (YYYY[-MM[-DD]])"
    )
    conflict: list[str] = Field(
        default_factory=list,
        description="ids of records that contradict it, with nothing later settling which holds",
    )


class QueryReply(Contract):
    """`status` is `error` with a reason for a bad request; never silence."""

    # 2: evidence carries supersession and conflict; 3: a window names its passage's turn;
    # 4: an item replaced in part names the values replaced
    latest_version: ClassVar[int] = 4
    schema_version: int = 4
    kind: Literal["reply"] = "reply"
    correlation_id: str
    namespace: str
    status: Literal["ok", "error"]
    error: str | None = None
    query: str = ""
    evidence: list[EvidenceItem] = Field(default_factory=list)
    context: str = Field(default="", description="the evidence in the answer prompt's two blocks")
    context_tokens: int = 0
    plan: dict[str, Any] | None = None
    answer: str | None = Field(
        default=None, description="the answer, when one was asked for and came back"
    )
    answer_error: str | None = Field(
        default=None, description="why no answer came back, when one was asked for"
    )
    answer_items: int | None = Field(
        default=None,
        ge=0,
        description="how many evidence items, in order, the answer was given: fewer than "
        "`evidence` holds when the rest did not fit the model's context window",
    )
    usage: dict[str, int] = Field(default_factory=dict, description="query-time LLM tokens")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    served_at: datetime | None = None
