"""Common base for every contract: strict, versioned, namespaced, bounded."""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = 1
MAX_INT64 = 2**63 - 1  # what Redis, Arrow and LanceDB columns can hold
# The largest seq: the Redis Lua scripts that allocate and raise seqs write a number back as
# text with 14 significant digits (Lua 5.1), so 10**14 and above come back as "1e+14".
MAX_SEQ = 10**14 - 1
TURN_CHARS = 200_000  # a turn's text: a long reply fits, a runaway generation does not
METADATA_MAX_DEPTH = 16  # free-form JSON deeper than this is refused at the door

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$")


def shown(value: object, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters: an error must name a bad value, not echo 10 kB."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)  # not repr's quotes
    return f"{text[:limit]}... ({size} {'bytes' if isinstance(value, bytes) else 'characters'})"


NAME_RULE = (
    "1-128 characters of ASCII letters, digits and . _ : @ + -, starting with a letter or digit"
)


def is_name(value: str) -> bool:
    """Whether `value` is a namespace or session id the service takes."""
    return _NAME_RE.fullmatch(value) is not None


def check_name(value: str) -> str:
    """`value` when it is a name; ValueError saying the rule otherwise."""
    if not is_name(value):
        raise ValueError(f"must be {NAME_RULE} (got {shown(value)})")
    return value


# Namespaces and session ids end up in storage filters and Redis keys: a strict
# alphabet keeps them safe to embed there without escaping games.
Name = Annotated[str, AfterValidator(check_name)]


def visible(text: str) -> bool:
    """Whether `text` shows anything: NULs, zero-width spaces and the like alone do not."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text)


def _not_blank(value: str) -> str:
    if not visible(value):
        raise ValueError("must say something: it is empty or only white space")
    return value


# What is asked of the memory: blank, a plan has nothing to search for.
Question = Annotated[str, Field(min_length=1, max_length=4_000), AfterValidator(_not_blank)]


def _representable(value: datetime) -> datetime:
    # stored in UTC and read back as a Python datetime (years 1-9999) by every listing; a
    # year spare each side leaves room for a day's arithmetic around it
    try:
        year = (value.astimezone(UTC) if value.tzinfo else value).year
    except OverflowError:
        year = 0
    if not 2 <= year <= 9998:
        raise ValueError(f"must fall between the years 2 and 9998 in UTC (got {value.isoformat()})")
    return value


# When something was said: any offset, within the years every store and listing can hold.
Moment = Annotated[datetime, AfterValidator(_representable)]

# Sequence numbers and positions: never negative, and exact wherever they are read.
Count = Annotated[int, Field(ge=0, le=MAX_SEQ)]
# ... and given by a producer we did not write: a number, "3" or true its mistake, named
Seq = Annotated[int, Field(ge=0, le=MAX_SEQ, strict=True)]


ID_CHARS = 200  # a caller's exchange or turn id


def plain_id(text: str) -> bool:
    """An id without control, formatting or line-breaking characters (a bidi override or a
    line separator would show another id in the console and listings than the one stored)."""
    return all(unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in text)


def _plain(value: str) -> str:
    if not plain_id(value):
        raise ValueError(f"holds control, formatting or line-breaking characters: {shown(value)}")
    return value


# the controls that reorder what follows them (embeddings, overrides, isolates)
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _a_speaker(value: str) -> str:
    # the joiners of an emoji or a Persian name (ZWJ, ZWNJ) and the marks of right-to-left
    # text are format characters a name holds; a control, a line break or a reordering is not
    if any(c in _BIDI_CONTROLS or unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise ValueError(f"holds control, line-breaking or reordering characters: {shown(value)}")
    return value


# Who said a turn, as listings, the console and an answer model's context show it: a name
# with spaces, but no character that would show another name or break the line
Speaker = Annotated[str, Field(max_length=200), AfterValidator(_a_speaker)]

# A turn's id as the stages pass it on: the caller's, or `exchange_id#index` (`#` and at most
# two digits past an exchange id, `schemas.exchange.turn_ids_of`).
TurnId = Annotated[str, Field(min_length=1, max_length=ID_CHARS + 3), AfterValidator(_plain)]
ExchangeId = Annotated[str, Field(min_length=1, max_length=ID_CHARS), AfterValidator(_plain)]


def json_depth(value: Any) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    # Deep JSON validates fine but breaks later: serializers and log lines hit their
    # recursion limits (DESIGN §10: bad input is refused with a clear error, at the door);
    # so does a lone surrogate, which no UTF-8 message can carry.
    depth = json_depth(value)
    if depth > METADATA_MAX_DEPTH:
        raise ValueError(f"nested {depth} levels deep; at most {METADATA_MAX_DEPTH} allowed")
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode()
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"holds {exc.object[exc.start]!r}, which is not text (a lone surrogate)"
        ) from None
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]


class Contract(BaseModel):
    """Every message on a topic: frozen, no unknown fields, carries its schema version."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    # A contract that gains a field raises its own latest version and writes it: a worker
    # that predates the field refuses the message by its version, not by an unknown field.
    latest_version: ClassVar[int] = SCHEMA_VERSION
    schema_version: int = SCHEMA_VERSION

    @field_validator("schema_version", mode="before")
    @classmethod
    def _a_whole_number(cls, v: Any) -> Any:
        # "2" or true read as a version would take a foreign client's mistake for a choice
        if type(v) is not int:
            raise ValueError(f"must be a whole number (got {shown(v)})")
        return v

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if not 1 <= v <= cls.latest_version:
            raise ValueError(
                f"unsupported schema_version {shown(v)}: this worker reads 1 to {cls.latest_version}"
            )
        return v
