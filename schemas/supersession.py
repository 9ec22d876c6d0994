"""Links between records that speak of the same thing: a newer statement supersedes an
older one, or two statements conflict and no later one settles which holds."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

REASON_MAX_CHARS = 300
_FOUND_BY = re.compile(r"(?:rule|llm):[^\s]{1,120}")


class LinkKind(StrEnum):
    supersedes = "supersedes"  # `newer_id` replaces `older_id` from `changed_at` on
    conflict = "conflict"  # both cannot hold; nothing later says which does


class Supersession(BaseModel):
    """One link between two records of a namespace, stored beside them, never in place of
    the older one: the history stays one query away.

    `found_by` says who found it, `rule:<name>` (the offline rules) or `llm:<model>` (the
    LLM encoder), and `reason` why, in a few words a person can check.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = Field(min_length=1)
    kind: LinkKind
    older_id: str = Field(
        min_length=1, description="the earlier record (either side of a conflict)"
    )
    newer_id: str = Field(min_length=1, description="the later record")
    changed_at: datetime | None = Field(
        default=None, description="when the newer statement was made: the change's time"
    )
    reason: str = Field(default="", max_length=REASON_MAX_CHARS)
    found_by: str

    @field_validator("found_by")
    @classmethod
    def _who(cls, v: str) -> str:
        if not _FOUND_BY.fullmatch(v):
            raise ValueError(f"must be rule:<name> or llm:<model> (got {v[:60]!r})")
        return v

    @model_validator(mode="after")
    def _two_records(self) -> Supersession:
        if self.older_id == self.newer_id:
            raise ValueError("a record cannot supersede or contradict itself")
        return self

    @property
    def link_id(self) -> str:
        """One row per kind and pair, whoever found it first: a link found again is the same."""
        key = f"{self.namespace}\x1f{self.kind.value}\x1f{self.older_id}\x1f{self.newer_id}"
        return hashlib.sha256(key.encode()).hexdigest()[:32]
