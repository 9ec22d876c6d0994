"""Raw turns on `memory.turns`: evidence that is searchable before its segment is encoded."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from schemas.base import TURN_CHARS, Contract, ExchangeId, Moment, Name, Seq, Speaker, TurnId
from schemas.exchange import Role, render_turn

# An embedding's component: finite, and small enough that its vector's norm is finite in
# float32 (the store's type), or every search of its namespace would score NaN.
EMBEDDING_BOUND = 1e6
Component = Annotated[float, Field(ge=-EMBEDDING_BOUND, le=EMBEDDING_BOUND, allow_inf_nan=False)]


class RawTurn(Contract):
    """One turn with the embedding the segmenter computed for it (computed once, reused)."""

    latest_version: ClassVar[int] = 2  # 2: `memory`
    schema_version: int = 2
    kind: Literal["raw_turn"] = "raw_turn"
    namespace: Name
    session_id: Name
    turn_id: TurnId  # the caller's, or its exchange's id and its place (`#3`)
    exchange_id: ExchangeId
    seq: Seq
    index: int = Field(
        ge=0, le=1_000, strict=True, description="position of the turn inside its exchange"
    )
    exchange_turns: int | None = Field(
        default=None,
        ge=1,
        le=1_001,
        description="how many turns its exchange has; without it the turn closes its exchange",
    )
    role: Role
    speaker: Speaker | None = None
    text: str = Field(max_length=TURN_CHARS)
    image_caption: str | None = Field(default=None, max_length=10_000)
    session_date: Moment | None = None  # years the store can read back (schemas.base)
    created_at: Moment | None = None
    embedding: list[Component] = Field(min_length=1, max_length=8_192)
    embedding_model: str = Field(min_length=1, max_length=200)
    memory: bool = Field(
        default=True, strict=True, description="false: listed, never searched (Turn.memory)"
    )

    @field_validator("embedding")
    @classmethod
    def _has_a_direction(cls, v: list[float]) -> list[float]:
        if not any(v):
            raise ValueError("all zeros: a vector without a direction matches nothing")
        return v

    def rendered(self) -> str:
        return render_turn(self.speaker, self.role, self.text, self.image_caption)

    def closes_exchange(self) -> bool:
        """Whether its exchange is whole once it is written: an exchange's turns may reach
        the indexer in different batches, and its seq is searchable only with all of them."""
        return self.exchange_turns is None or self.index + 1 >= self.exchange_turns
