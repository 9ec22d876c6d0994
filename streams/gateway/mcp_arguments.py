"""What an MCP tool takes and gives back, and how a refused argument is named: the tool's
own argument (`messages`, `content`), not the field of the exchange it fills, in the
project's words, not the validation library's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas import EvidenceItem, Role
from schemas.base import TURN_CHARS, Speaker
from schemas.base import check_name as a_name
from schemas.errors import validation_reason
from schemas.gateway import ExchangeIn
from workers.query.hits import record_id_of
from workers.query.serialize import currency_notes


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")  # as the REST routes: a misspelled field is named

    role: Role = Role.user
    content: str = Field(min_length=1, max_length=TURN_CHARS)
    speaker: Speaker | None = None


class Memory(BaseModel):
    text: str
    kind: str = Field(description="record (a consolidated fact), turn or window (raw words)")
    date: str | None = Field(description="when it was said or happened (ISO)")
    session_id: str
    speaker: str | None = None
    memory_type: str | None = None
    turn_ids: list[str]
    score: float = Field(description="relevance as ranked: never above the memory before it")
    id: str = Field(
        description="the memory's id; `replaced_by`, `replaces` and `conflicts_with` name records"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="what later statements say of it, in words: replaced (and when, and "
        "which of its values when the others were not said to change), current since, "
        "contradicted; empty when nothing does",
    )
    replaced_by: list[str] = Field(default_factory=list, description="ids of later records")
    replaces: list[str] = Field(default_factory=list, description="ids of earlier records")
    conflicts_with: list[str] = Field(default_factory=list, description="ids of records")
    span: tuple[int, int] | None = Field(
        default=None, description="where the passage shown is in its turn's text (`span_turn_id`)"
    )
    span_turn_id: str | None = None

    @classmethod
    def of(cls, e: EvidenceItem, score: float) -> Memory:
        """An evidence item as a tool's caller reads it: its resolved date, else its own."""
        return cls(
            text=e.text,
            kind=e.kind,
            date=e.resolved_date or (e.date.isoformat() if e.date else None),
            session_id=e.session_id,
            speaker=e.speaker,
            memory_type=e.memory_type,
            turn_ids=e.turn_ids,
            score=score,
            id=record_id_of(e.item_id) if e.kind == "record" else e.item_id,
            notes=currency_notes(e),
            replaced_by=e.superseded_by,
            replaces=e.supersedes,
            conflicts_with=e.conflict,
            span=e.span,
            span_turn_id=e.span_turn_id,
        )


class SearchResult(BaseModel):
    query: str
    memories: list[Memory]

    @classmethod
    def of(cls, query: str, evidence: list[EvidenceItem]) -> SearchResult:
        return cls(
            query=query,
            memories=[Memory.of(e, s) for e, s in zip(evidence, ranked(evidence), strict=True)],
        )


def ranked(evidence: list[EvidenceItem]) -> list[float]:
    """Each item's selection score, at most the one above it: the reply's order puts today's
    value or an instruction above an item selection scored higher. An item selection did not
    score (today's value added from the store) takes the score of the item it went above."""
    own = [e.scores.get("final", e.scores.get("rrf")) for e in evidence]
    below: float | None = None
    for i in range(len(own) - 1, -1, -1):
        below = own[i] = own[i] if own[i] is not None else below
    out: list[float] = []
    for s in own:
        score = round(s if s is not None else 0.0, 4)
        out.append(min(score, out[-1]) if out else score)
    return out


def check_name(field: str, value: str) -> None:
    try:
        a_name(value)
    except ValueError as exc:
        raise ToolError(f"{field}: {exc}") from exc


def exchange_in(
    content: str | None,
    messages: list[Message] | None,
    role: Role,
    speaker: str | None,
    session_id: str,
    exchange_id: str | None,
    session_date: datetime | None,
) -> ExchangeIn:
    if (content is None) == (messages is None):
        raise ToolError("give either `content` or `messages`")
    turns = (
        [{"role": role, "content": content or "", "speaker": speaker}]
        if messages is None
        else [m.model_dump() for m in messages]
    )
    try:  # one validation, so that each error says which turn
        return ExchangeIn.model_validate(
            {
                "session_id": session_id,
                "exchange_id": exchange_id,
                "turns": turns,
                "session_date": session_date,
            }
        )
    except ValidationError as exc:
        # the exchange's `turns` are the tool's `messages`, or its `content` and `speaker`
        def as_argument(loc: tuple[Any, ...]) -> tuple[Any, ...]:
            if loc[:1] != ("turns",):
                return loc
            return ("messages", *loc[1:]) if messages is not None else loc[2:] or ("content",)

        raise ToolError(fields(exc, as_argument)) from exc


def fields(
    exc: ValidationError, as_argument: Callable[[tuple[Any, ...]], tuple[Any, ...]] = tuple
) -> str:
    """Each field in error by the tool's argument it came from (`as_argument`), and why."""
    named = [(".".join(str(p) for p in as_argument(tuple(e["loc"]))), e) for e in exc.errors()]
    return "; ".join(f"{where or '<input>'}: {validation_reason(e)}" for where, e in named)
