"""Raw turns on `memory.turns`: evidence that is searchable before its segment is encoded."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from schemas.base import Contract, Name
from schemas.exchange import Role, render_turn


class RawTurn(Contract):
    """One turn with the embedding the segmenter computed for it (computed once, reused)."""

    kind: str = "raw_turn"
    namespace: Name
    session_id: Name
    turn_id: str = Field(min_length=1, max_length=200)
    exchange_id: str = Field(min_length=1, max_length=200)
    seq: int = Field(ge=0)
    index: int = Field(ge=0, description="position of the turn inside its exchange")
    role: Role
    speaker: str | None = None
    text: str
    image_caption: str | None = None
    session_date: datetime | None = None
    created_at: datetime | None = None
    embedding: list[float] = Field(min_length=1)
    embedding_model: str

    def rendered(self) -> str:
        return render_turn(self.speaker, self.role, self.text, self.image_caption)
