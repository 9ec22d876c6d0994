"""Memory records on `memory.records` (the paper's record schema, App. C.2) and evidence nodes."""

from __future__ import annotations

import hashlib
import re
from datetime import date
from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.base import Contract, Count, Moment, Name, TurnId
from schemas.segment import BoundarySignals, FinalizeReason, segment_id
from schemas.supersession import Supersession

SEMANTIC_TEXT_MAX_CHARS = 4_000
# entities and tags a record names: each pair is an evidence node with its own vector, so an
# uncapped list is one message that writes a table's worth of rows (a dev split's records
# name at most 8 of either)
MAX_LABELS = 32
# ... and a pair node is made of each of its first PAIRED entities with each of its first
# PAIRED tags: 32 of each would be 1,024 pairs a record, 100,000 rows a message
PAIRED = 8
LABEL_MAX_CHARS = 200
CONTEXT_MAX_CHARS = 400  # a record's searchable context: the subject its neighbours name
DISAMBIGUATION_MAX_CHARS = 1_200  # the note carried to the next segment (paper §3.3)


class MemoryType(StrEnum):
    fact = "fact"  # stable attribute, relationship or state
    preference = "preference"  # like, dislike, habit, recurring choice
    event = "event"  # dated one-off occurrence
    constraint = "constraint"  # limit, policy, restriction
    procedure = "procedure"  # reusable steps or workflow
    failure_pattern = "failure_pattern"  # mistake, pitfall, lesson
    tool_affordance = "tool_affordance"  # capability or limitation of a tool


class Temporal(BaseModel):
    """ISO dates (`YYYY`, `YYYY-MM` or `YYYY-MM-DD`), or empty when unknown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    t_ref: str = ""
    t_valid_from: str = ""
    t_valid_to: str = ""

    @field_validator("t_ref", "t_valid_from", "t_valid_to")
    @classmethod
    def _iso(cls, v: str) -> str:
        v = v.strip()
        if v and not _ISO_PARTIAL.fullmatch(v):
            raise ValueError(f"must be YYYY, YYYY-MM or YYYY-MM-DD (got {v!r})")
        if v.startswith("0000"):
            raise ValueError(f"has no year 0 (got {v!r})")
        if len(v) == 10:
            date.fromisoformat(v)  # a real calendar day
        return v

    def dates(self) -> list[str]:
        return [d for d in (self.t_ref, self.t_valid_from, self.t_valid_to) if d]


_ISO_PARTIAL = re.compile(r"\d{4}(-(0[1-9]|1[0-2])(-\d{2})?)?")

SourceRole = Literal["user", "assistant", "both", ""]
Label = Annotated[str, Field(max_length=LABEL_MAX_CHARS)]


class MemoryRecord(BaseModel):
    """One self-contained statement with its provenance.

    `record_id` is derived from the namespace and the normalized text, so the same
    statement seen twice is one record (its provenance merged by the indexer).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    record_id: str
    namespace: Name
    memory_type: MemoryType
    semantic_text: str = Field(min_length=1, max_length=SEMANTIC_TEXT_MAX_CHARS)
    normalized_text: str
    entities: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    tags: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    temporal: Temporal = Temporal()
    evidence: list[TurnId] = Field(description="source turn ids")
    source_session: str
    segment_id: str
    source_role: SourceRole = ""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    created_at: Moment | None = None
    context: str = Field(
        default="",
        max_length=CONTEXT_MAX_CHARS,
        description="searched with the record, never shown: the subject that neighbouring "
        "turns name (a place, event, person or thing) when the record's own words do not",
    )

    @model_validator(mode="after")
    def _derived_id(self) -> MemoryRecord:
        """The id is the namespace's and the text's (`record_id`): an id of another
        namespace's record would merge into that record's row."""
        expected = record_id(self.namespace, self.normalized_text)
        if self.record_id != expected:
            raise ValueError(f"record_id must be {expected!r}, derived from namespace and text")
        return self

    def search_text(self) -> str:
        """What is embedded and full-text indexed: the normalized text, then the context."""
        return search_text(self.normalized_text, self.context)


def search_text(normalized: str, context: str) -> str:
    return f"{normalized} (context: {context})" if context else normalized


class TokenUsage(BaseModel):
    """Construction tokens of one encoder call (real from the API, or estimated offline)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    prompt_tokens: int = Field(
        default=0, description="tokens of the encoder prompt (what an LLM call would read)"
    )
    calls: int = 0


class RecordBatch(Contract):
    """The records of one finalized segment, with what the event-frame node needs."""

    latest_version: ClassVar[int] = 3  # 2: records carry `context`; 3: `supersessions`
    schema_version: int = 3
    kind: Literal["record_batch"] = "record_batch"
    namespace: Name
    session_id: Name
    segment_id: str
    segment_index: Count
    first_turn_id: TurnId
    last_turn_id: TurnId
    session_date: Moment | None = None
    encoder: str = Field(description="`extractive` or `llm:<model>`")
    records: list[MemoryRecord] = Field(default_factory=list)
    disambiguation_context: str = Field(default="", max_length=DISAMBIGUATION_MAX_CHARS)
    usage: TokenUsage = TokenUsage()
    supersessions: list[Supersession] = Field(
        default_factory=list,
        description="what the encoder found its records to replace or contradict among the "
        "namespace's earlier records (the LLM encoder; the indexer's rules add their own)",
    )
    # where the segment sits in its session and why it was closed: what a session timeline
    # shows beside the records (None in batches encoded before these were carried)
    reason: FinalizeReason | None = None
    signals: BoundarySignals | None = None
    first_seq: Count | None = None
    last_seq: Count | None = None
    exchanges: Count = 0
    tokens: Count = 0

    @model_validator(mode="after")
    def _one_namespace(self) -> RecordBatch:
        expected = segment_id(self.namespace, self.session_id, self.segment_index)
        if self.segment_id != expected:
            raise ValueError(f"segment_id must be {expected!r} (namespace/session_id/index)")
        for i, r in enumerate(self.records):
            if r.namespace != self.namespace:
                raise ValueError(
                    f"records.{i}.namespace {r.namespace!r} is not the batch's {self.namespace!r}"
                )
            if r.segment_id != self.segment_id:
                raise ValueError(f"records.{i}.segment_id is not the batch's {self.segment_id!r}")
        for i, link in enumerate(self.supersessions):
            if link.namespace != self.namespace:
                raise ValueError(f"supersessions.{i} is not of the batch's namespace")
        return self

    @property
    def key(self) -> str:
        """The Kafka key on `memory.records`: the namespace, not the session.

        Records and evidence nodes are merged into their rows by read-modify-write (provenance
        unioned, links folded). Keyed by namespace, every batch of a namespace goes through one
        partition, so one indexer process at a time owns the namespace's rows, whatever the
        number of indexers: no two writers merge into one row (DESIGN §9, scale-out).
        """
        return self.namespace


class NodeType(StrEnum):
    entity = "entity"
    topic = "topic"
    entity_topic = "entity_topic"
    temporal = "temporal"
    event_frame = "event_frame"


PAIR_SEPARATOR = " / "


def pair_label(entity: str, topic: str) -> str:
    """An entity/topic pair node's label: `Ann / travel`."""
    return f"{entity}{PAIR_SEPARATOR}{topic}"


def pair_parts(label: str) -> tuple[str, ...]:
    """The entity and topic of a pair's label, split at the first separator (an entity that
    holds one splits there too: the same two texts every time); a label without one whole."""
    return tuple(p for p in label.partition(PAIR_SEPARATOR)[::2] if p) or (label,)


def normalize_text(memory_type: MemoryType, semantic_text: str) -> str:
    return f"{memory_type.value}: {' '.join(semantic_text.split())}"


def record_id(namespace: str, normalized_text: str) -> str:
    """Content-derived id: case and whitespace do not make a new record."""
    key = f"{namespace}\x1f{' '.join(normalized_text.lower().split())}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]
