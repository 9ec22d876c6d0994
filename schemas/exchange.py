"""What clients produce to `memory.exchanges`: exchanges and per-session control messages."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.base import (
    MAX_SEQ,
    TURN_CHARS,
    Contract,
    Metadata,
    Moment,
    Name,
    Seq,
    Speaker,
    plain_id,
    shown,
    visible,
)
from schemas.errors import ContractError


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    system = "system"


class Turn(BaseModel):
    """One utterance. `turn_id` is the caller's id (LoCoMo's `dia_id`) when it has one: it
    names one turn of the session, and records cite it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: str = Field(max_length=TURN_CHARS)
    speaker: Speaker | None = None
    created_at: Moment | None = None
    turn_id: str | None = Field(default=None, min_length=1, max_length=200)
    image_caption: str | None = Field(default=None, max_length=10_000)
    memory: bool = Field(
        default=True,
        strict=True,  # "no" or 0 would take a turn out of memory without a word
        description=(
            "false: kept with its session (listed, forgotten with it) but not memory: no "
            "record is made of it and no search or window shows it (an agent's tool calls "
            "and their outputs, reasoning items)"
        ),
    )

    @model_validator(mode="after")
    def _has_text(self) -> Turn:
        if not visible(self.content) and not visible(self.image_caption or ""):
            raise ValueError("a turn needs content or an image caption with a visible character")
        if self.turn_id is not None and not plain_id(self.turn_id):
            raise ValueError("turn_id holds control, formatting or line-breaking characters")
        return self

    def rendered(self) -> str:
        return render_turn(self.speaker, self.role, self.content, self.image_caption)

    def said(self) -> tuple[str | bool | None, ...]:
        """Who said what: a turn's identity, which no date or metadata changes; a turn that
        is not memory is another turn than the same words that are."""
        said: tuple[str | bool | None, ...] = (
            self.role.value,
            self.speaker,
            self.content,
            self.image_caption,
        )
        return said if self.memory else (*said, False)

    def digest(self) -> str:
        """`said`, in 16 hex digits: a turn id must name the same words throughout its
        session (the gateway's allocator and the segmenter check it)."""
        # compact UTF-8 JSON (orjson's bytes, which digests stored before were taken of),
        # from the standard library: the client's distribution has no orjson
        text = json.dumps(self.said(), ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def turn_text(content: str, caption: str | None) -> str:
    """`text [image: caption]`: a turn's words with what it showed."""
    text = content.strip()
    return f"{text} [image: {caption.strip()}]".strip() if caption else text


def render_turn(speaker: str | None, role: Role, content: str, caption: str | None) -> str:
    """`Speaker: text [image: caption]`, the form that is embedded and searched."""
    return f"{speaker or role.value}: {turn_text(content, caption)}"


def turn_ids_of(exchange_id: str, turns: Sequence[Turn]) -> list[str]:
    """Deterministic turn ids: the caller's, else `exchange_id#index`."""
    return [t.turn_id or f"{exchange_id}#{i}" for i, t in enumerate(turns)]


def named_turns(exchange_id: str, turns: Sequence[Turn]) -> tuple[tuple[str, str], ...]:
    """Each turn's id (`turn_ids_of`) with the digest of its words (who said what): an id
    names the same words throughout its session, a caller's `e7#0` the turn exchange `e7`
    made as well."""
    ids = turn_ids_of(exchange_id, turns)
    return tuple((tid, t.digest()) for tid, t in zip(ids, turns, strict=True))


class Exchange(Contract):
    """One step of a conversation: a speaker turn, or a user message with its reply.

    `seq` is set by the producer, strictly increasing per session; the segmenter
    applies each `seq` once, so a replayed or out-of-order exchange changes nothing.
    """

    latest_version: ClassVar[int] = 2  # 2: a turn says whether it is memory
    schema_version: int = 2
    kind: Literal["exchange"] = "exchange"
    namespace: Name
    session_id: Name
    seq: Seq
    exchange_id: str = Field(min_length=1, max_length=200)
    turns: list[Turn] = Field(min_length=1, max_length=64)
    session_date: Moment | None = None
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("exchange_id")
    @classmethod
    def _plain(cls, v: str) -> str:
        if not plain_id(v):
            raise ValueError("holds control, formatting or line-breaking characters")
        return v

    @model_validator(mode="after")
    def _an_id_names_one_turn(self) -> Exchange:
        """Two turns of one exchange under one id with other words: one would be stored and
        records would cite it for both (the gateway refuses it with a 409; a producer of its
        own reaches the stages)."""
        ids = self.turn_ids()
        if len(set(ids)) == len(ids):
            return self
        first: dict[str, tuple[int, str]] = {}
        for i, (tid, digest) in enumerate(self.named_turns()):
            at, said = first.setdefault(tid, (i, digest))
            if said != digest:
                raise ValueError(
                    f"turns.{i}.turn_id {shown(tid)} is the id of turns.{at}, which says other "
                    "words: a turn id names one turn"
                )
        return self

    @property
    def key(self) -> str:
        return session_key(self.namespace, self.session_id)

    def turn_ids(self) -> list[str]:
        return turn_ids_of(self.exchange_id, self.turns)

    def named_turns(self) -> tuple[tuple[str, str], ...]:
        return named_turns(self.exchange_id, self.turns)

    def rendered(self) -> str:
        return "\n".join(t.rendered() for t in self.turns)

    def remembered(self) -> str:
        """Its memory turns' text (`Turn.memory`): what is embedded for it, segmented and
        encoded; empty for an exchange of an agent's tool items only."""
        return "\n".join(t.rendered() for t in self.turns if t.memory)


class ControlKind(StrEnum):
    flush = "flush"
    end_session = "end_session"


class SessionControl(Contract):
    """`flush` finalizes the open segment; `end_session` does that and forgets the session's state."""

    kind: ControlKind
    namespace: Name
    session_id: Name
    after_seq: int | None = Field(
        default=None,
        ge=-1,
        le=MAX_SEQ,
        description="seq of the producer's last exchange before this message; a replayed "
        "control message whose after_seq is behind the session is ignored",
    )

    @property
    def key(self) -> str:
        return session_key(self.namespace, self.session_id)


ExchangeTopicMessage = Exchange | SessionControl


def session_key(namespace: str, session_id: str) -> str:
    """The Kafka key for everything about one session: one session, one partition."""
    return f"{namespace}/{session_id}"


def parse_exchange_message(data: Any) -> ExchangeTopicMessage:
    """Validate a decoded `memory.exchanges` value; raises ContractError naming the bad field."""
    if not isinstance(data, dict):
        raise ContractError("exchange message", [("", "expected a JSON object")])
    kind = data.get("kind", "exchange")
    model: type[Exchange] | type[SessionControl]
    if kind == "exchange":
        model = Exchange
    elif isinstance(kind, str) and kind in ControlKind.__members__:
        model = SessionControl
    else:  # any JSON value may stand here: a list or an object must not raise TypeError
        raise ContractError(
            "exchange message",
            [("kind", f"must be 'exchange', 'flush' or 'end_session' (got {shown(kind)})")],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ContractError.from_validation(model.__name__, exc) from exc
