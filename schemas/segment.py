"""Finalized segments on `memory.segments`: the unit of one encoder call."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.base import Contract, Count, ExchangeId, Moment, Name, TurnId
from schemas.exchange import Turn


class FinalizeReason(StrEnum):
    semantic_boundary = "semantic_boundary"  # P_cut >= delta
    capacity_limit = "capacity_limit"  # the next exchange would pass the hard token cap
    target_length = "target_length"  # reached the target token length after an append
    exchange_limit = "exchange_limit"  # reached the exchange-count cap after an append
    session_flush = "session_flush"  # flush / end_session / idle timeout
    day_change = "day_change"  # the next exchange is dated another day
    oversized_exchange = "oversized_exchange"  # a fragment of an exchange longer than the cap
    per_exchange = "per_exchange"  # eager variant: every exchange is its own segment


class SegmentMode(StrEnum):
    semantic = "semantic"
    fixed_window = "fixed_window"
    eager = "eager"


class BoundarySignals(BaseModel):
    """The signals of a boundary decision (DESIGN §5), kept for inspection and tuning."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    surprise: float
    robust_surprise: float
    absolute_surprise: float
    cohesion_drop: float
    cohesion_term: float
    length_pressure: float
    turn_pressure: float
    score: float
    p_cut: float


class LogPosition(BaseModel):
    """Where an exchange was read in `memory.exchanges`: its lineage for forget fences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class SegmentExchange(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    exchange_id: ExchangeId
    seq: Count
    turn_ids: list[TurnId] = Field(description="one per turn (a split turn repeats its id)")
    turns: list[Turn]
    tokens: Count
    fragment: int | None = Field(
        default=None, ge=0, description="fragment number of a split exchange"
    )
    source: LogPosition | None = Field(
        default=None, description="where the exchange was read (None: unknown)"
    )
    trace: str | None = Field(
        default=None,
        max_length=512,
        description="W3C traceparent of the exchange's handling, linked from the segment's "
        "spans (None: untraced)",
    )

    @model_validator(mode="after")
    def _one_id_a_turn(self) -> Self:
        if len(self.turn_ids) != len(self.turns):
            raise ValueError(
                f"turn_ids has {len(self.turn_ids)} ids for {len(self.turns)} turns (one a turn)"
            )
        return self


class Segment(Contract):
    """`segment_id` is `namespace/session_id/n`: redelivery yields the same id."""

    latest_version: ClassVar[int] = 2  # 2: its turns say whether they are memory
    schema_version: int = 2
    kind: Literal["segment"] = "segment"
    segment_id: str
    namespace: Name
    session_id: Name
    index: Count
    mode: SegmentMode
    reason: FinalizeReason
    exchanges: list[SegmentExchange] = Field(min_length=1)
    first_turn_id: TurnId
    last_turn_id: TurnId
    tokens: Count
    session_date: Moment | None = None
    signals: BoundarySignals | None = Field(
        default=None, description="signals of the decision that closed the segment, if any"
    )

    @model_validator(mode="after")
    def _id_of_its_place(self) -> Self:
        """The id names the segment's namespace, session and index: the encoder caches and
        leases its work by it, so an id of another namespace's segment must not pass."""
        expected = segment_id(self.namespace, self.session_id, self.index)
        if self.segment_id != expected:
            raise ValueError(f"segment_id must be {expected!r} (namespace/session_id/index)")
        return self

    @property
    def turn_ids(self) -> list[str]:
        return list(dict.fromkeys(tid for ex in self.exchanges for tid in ex.turn_ids))


def segment_id(namespace: str, session_id: str, index: int) -> str:
    return f"{namespace}/{session_id}/{index}"
