"""The HTTP contracts: what the gateway's routes and MCP tools take and return (JSON), and
so what `lychee_client` sends and reads.

Inputs reuse the `schemas` contracts' field rules (names, turns, limits); the namespace comes
from the path, `seq` and `exchange_id` may be left to the gateway.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from schemas import Turn
from schemas.base import MAX_SEQ, Count, Metadata, Moment, Name, Question, plain_id
from schemas.query import K_MAX, TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN, Ablation


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExchangeIn(_In):
    """One exchange of a session (a speaker turn, or a user message with its reply)."""

    session_id: Name
    exchange_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="the caller's id: re-sending it with the same turns returns the first "
        "receipt instead of adding it twice (other turns: 409); when omitted, made of the "
        "caller's seq and turns if it gives a seq (a re-send is the same exchange), else "
        "generated (a re-send is a new exchange)",
    )
    seq: Count | None = Field(
        default=None,
        strict=True,  # a number: "3" or true is the caller's mistake, named, not read as one
        description="the caller's per-session order; omit it to let the gateway number the "
        "session's exchanges in arrival order",
    )
    turns: list[Turn] = Field(min_length=1, max_length=64)
    session_date: Moment | None = None
    metadata: Metadata = Field(default_factory=dict)
    namespace: Name | None = Field(
        default=None, description="optional; must equal the namespace of the path"
    )

    @field_validator("exchange_id")
    @classmethod
    def _plain(cls, v: str | None) -> str | None:
        if v is not None and not plain_id(v):
            raise ValueError("holds control, formatting or line-breaking characters")
        return v


class AddExchanges(_In):
    exchanges: list[ExchangeIn] = Field(min_length=1)


class ExchangeReceipt(BaseModel):
    exchange_id: str
    session_id: str
    seq: int
    partition: int
    offset: int
    duplicate: bool = Field(description="accepted before: the first receipt, nothing produced")


class SessionReceipt(BaseModel):
    session_id: str
    last_seq: int = Field(description="the highest seq of this request in the session")
    partition: int
    offsets: list[int]


class Receipt(BaseModel):
    """What an add returns at once: pass it as `wait_for` to a search to read your writes."""

    namespace: str
    sessions: list[SessionReceipt]
    exchanges: list[ExchangeReceipt]


class SessionSeq(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: Name
    last_seq: Count


class WaitFor(BaseModel):
    """A receipt (or its `sessions`): the search waits until these seqs are indexed."""

    model_config = ConfigDict(extra="ignore")

    namespace: Name | None = None
    sessions: list[SessionSeq] = Field(min_length=1, max_length=1000)


class SearchIn(_In):
    query: Question
    k: int = Field(default=10, ge=1, le=K_MAX, strict=True)
    session_id: Name | None = None
    answer: bool = False
    ablation: Ablation | None = None
    token_budget: int | None = Field(
        default=None,
        strict=True,
        ge=TOKEN_BUDGET_MIN,
        le=TOKEN_BUDGET_MAX,
        description="the most tokens the evidence may take in a prompt (QueryRequest's)",
    )
    timeout_s: float | None = Field(
        default=None, gt=0, description="the whole request's budget, waiting included"
    )
    wait_for: WaitFor | None = Field(
        default=None, description="a receipt to wait for before searching (read your writes)"
    )


class ControlIn(_In):
    after_seq: int | None = Field(
        default=None,
        strict=True,
        ge=-1,
        le=MAX_SEQ,
        description="seq of the last exchange this control follows; default: the session's "
        "last seq allocated, acked or applied",
    )


class ControlReceipt(BaseModel):
    namespace: str
    session_id: str
    kind: Literal["flush", "end_session"]
    after_seq: int
    partition: int
    offset: int


class SessionStatus(BaseModel):
    session_id: str
    last_seq_accepted: int | None = Field(description="highest seq the gateway got acked")
    segmented_seq: int | None = Field(description="highest seq the segmenter applied")
    indexed_seq: int | None = Field(description="highest seq whose raw turns are indexed")
    open_segment_exchanges: int = Field(description="exchanges waiting in the open segment")
    ended: bool
    searchable: bool = Field(description="everything accepted is indexed")


class NamespaceStatus(BaseModel):
    namespace: str
    sessions: list[SessionStatus]
    searchable: bool


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details (`application/problem+json`)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldError] | None = None


class ForgetOut(BaseModel):
    """What a forget removed, once the segmenter, encoder and indexer all confirmed."""

    forget_id: str
    namespace: str
    session_id: str | None = None
    rows_removed: dict[str, int]
    rows_updated: dict[str, int]
    redis_keys_removed: int
    versions_pruned: int
    elapsed_s: float
    stages: dict[str, float] = Field(description="seconds each stage took")


class RecordsPage(BaseModel):
    """One page of what is remembered: records, or raw turns with `turns=true`."""

    namespace: str
    kind: Literal["records", "turns"]
    total: int
    page: int
    page_size: int
    pages: int
    items: list[dict[str, Any]]


class HistoryOut(BaseModel):
    """A namespace's (or one record's) supersessions, oldest change first, and the conflicts
    nothing settled: each with both records (`older`, `newer`: id, text, session, turns,
    date), the time of the change, the reason and who found it (`rule:` or `llm:`)."""

    namespace: str
    record_id: str | None = None
    supersessions: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]


# -- what the console shows --------------------------------------------------------------------


class WhoAmI(BaseModel):
    name: str = Field(description="the API key's name; `local` when no keys are configured")
    namespaces: list[str] | None = Field(description="the key's namespace patterns; null: all")
    keys_required: bool


class NamespaceSummary(BaseModel):
    namespace: str
    sessions: int = Field(description="sessions with raw turns")
    turns: int
    records: int
    nodes: int
    segments: int
    last_write: datetime | None = Field(description="when the indexer last wrote its turns")
    searchable: bool = Field(description="everything the gateway accepted is indexed")


class NamespacesOut(BaseModel):
    """The namespaces the caller may read (and only those)."""

    namespaces: list[NamespaceSummary]


class SessionSummary(BaseModel):
    session_id: str
    turns: int
    segments: int
    records: int = Field(description="records this session produced (shared ones included)")
    first_seq: int | None
    last_seq: int | None
    first_date: datetime | None = Field(description="earliest conversation date of its turns")
    last_date: datetime | None
    last_seq_accepted: int | None
    indexed_seq: int | None
    open_segment_exchanges: int
    ended: bool
    searchable: bool


class SessionsOut(BaseModel):
    namespace: str
    sessions: list[SessionSummary]


class TimelineSegment(BaseModel):
    """A segment overlapping the page: where it lies, why it was closed, what it yielded."""

    segment_id: str
    segment_index: int
    reason: str | None = Field(description="finalize reason; null for older batches")
    signals: dict[str, float] | None = Field(description="boundary signals of the closing cut")
    first_seq: int | None
    last_seq: int | None
    first_turn_id: str
    last_turn_id: str
    exchanges: int
    tokens: int
    session_date: datetime | None
    encoder: str
    records: list[dict[str, Any]]


class TimelineOut(BaseModel):
    """One page of a session's raw turns, each with its segment id (null: not yet in a
    finalized segment), and the segments those turns fall in, with their records."""

    namespace: str
    session_id: str
    total: int
    page: int
    page_size: int
    pages: int
    turns: list[dict[str, Any]]
    segments: list[TimelineSegment]
    open_segment_exchanges: int = Field(description="exchanges waiting in the open segment")


class OperationsOut(BaseModel):
    """The stack's health; the stack-wide parts only for a caller allowed every namespace."""

    stack_wide: bool = Field(description="false: this key sees only its namespaces' counters")
    supervision: dict[str, Any] | None = None
    stages: list[dict[str, Any]] = Field(default_factory=list, description="lag per stage")
    dead_letters: dict[str, int] = Field(default_factory=dict, description="per DLQ topic")
    rows: dict[str, int] = Field(default_factory=dict)
    construction_tokens: dict[str, dict[str, int]] = Field(
        description="per namespace the caller may read"
    )


# -- dead letters (over `streams.dlq`) ---------------------------------------------------------


class DeadLetterSample(BaseModel):
    """One dead letter as a reader wants it (its text is any namespace's: untrusted)."""

    id: str = Field(description="PARTITION:OFFSET in the dead-letter topic")
    stage: str | None = Field(description="the stage that dead-lettered it")
    error: str
    source: str = Field(description="where it was read: source topic PARTITION:OFFSET")
    failed_at: datetime | None
    key: Any = Field(description="the original key as text ({hex} when it does not decode)")
    value: Any = Field(description="the start of the original value as text, or {hex}")


class DeadLetterReason(BaseModel):
    topic: str = Field(description="the dead-letter topic")
    error_type: str = Field(description="the reason's code: json, schema, unprocessable...")
    count: int
    oldest: datetime | None
    newest: datetime | None
    after_replay: int = Field(description="replayed messages that failed again")
    replayed_before: int = Field(description="replayed already: a replay skips them")
    sample: DeadLetterSample


class DeadLettersOut(BaseModel):
    """Dead letters by topic and reason, for a caller allowed every namespace."""

    reasons: list[DeadLetterReason]


class ReplayIn(_In):
    topic: str = Field(
        max_length=200,
        description="a source topic such as memory.segments, or its dead-letter topic",
    )
    error_type: str | None = Field(default=None, max_length=200, description="one reason only")
    since: AwareDatetime | None = Field(default=None, description="failed at or after")
    dry_run: bool = Field(default=False, description="say what would be replayed, send nothing")
    force: bool = Field(default=False, description="replay dead letters replayed before")


class ReplayOut(BaseModel):
    """What a replay sent back to the source topics (a dry run: would send), what it skipped
    as replayed before, what it could not copy (too large: it stays in its source), and what
    it never replays (forgotten since, or naming a foreign topic)."""

    replay_id: str
    dry_run: bool
    selected: int
    replayed: list[dict[str, Any]]
    already: list[dict[str, Any]]
    not_copied: list[dict[str, Any]]
    forgotten: list[dict[str, Any]] = Field(
        description="not replayed: their namespace or session was forgotten after they failed"
    )
    misdirected: list[dict[str, Any]] = Field(
        description="not replayed: their headers name a topic their dead-letter topic does "
        "not serve"
    )
    twins: list[dict[str, Any]] = Field(
        default_factory=list,
        description="sent once for another selected letter of the same message (every stage "
        "that read it wrote one): `as` names that letter",
    )
    refusal: str | None = Field(
        description="why a replay of this selection is (or, in a dry run, would be) refused"
    )
