"""What travels on `memory.control`: forgetting a namespace or one session, and the receipts.

A forget carries the end offsets of `memory.exchanges` read just before it was sent: every
exchange of the namespace (or session) below them was produced before the forget and is
dropped wherever it is met, together with everything derived from it, so nothing produced
before the forget can come back however late it is consumed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from schemas.base import MAX_INT64, Contract, Name

FORGET_STAGES = ("segmenter", "encoder", "indexer")


class ForgetRequest(Contract):
    """Forget `namespace`, or only `session_id` in it, everywhere."""

    kind: Literal["forget"] = "forget"
    forget_id: str = Field(min_length=1, max_length=100)
    namespace: Name
    session_id: Name | None = None
    exchanges_end: dict[int, int] = Field(
        description="partition of memory.exchanges -> its high watermark before the forget"
    )
    reply_partition: int | None = Field(
        default=None, ge=0, le=1_000_000, description="where on memory.replies receipts go"
    )
    requested_at: datetime

    @field_validator("exchanges_end")
    @classmethod
    def _offsets(cls, v: dict[int, int]) -> dict[int, int]:
        for p, end in v.items():
            if not (0 <= p <= 1_000_000 and 0 <= end <= MAX_INT64):
                raise ValueError(f"partition {p} -> offset {end} is out of range")
        return v


class ForgetReceipt(Contract):
    """One stage's part of a forget's receipt, on `memory.replies` keyed by `forget_id`."""

    kind: Literal["forget_receipt"] = "forget_receipt"
    forget_id: str = Field(min_length=1, max_length=100)
    stage: str
    namespace: Name
    session_id: Name | None = None
    rows_removed: dict[str, int] = Field(default_factory=dict)
    rows_updated: dict[str, int] = Field(default_factory=dict)
    redis_keys_removed: int = 0
    versions_pruned: int = 0
    elapsed_s: float = 0.0
    error: str = ""
