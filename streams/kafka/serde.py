"""Bytes <-> contracts. Errors name the topic, the field and what is wrong.

What comes off a topic is checked in this order, each step before any work is spent on it:
present (a null or empty value), size (`max_bytes`, before the bytes are parsed), JSON
(orjson: invalid UTF-8, lone surrogates and nesting past 1024 are refused here), contract
(types, bounds, unknown fields, schema version). Each failure carries `error_type`, the
short reason code that dead letters carry in their headers.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas import ContractError
from streams.kafka.errors import SerdeError

M = TypeVar("M", bound=BaseModel)

# The reason codes of dead letters written here (DeadLetters adds the processing ones).
NULL_VALUE = "null_value"
EMPTY = "empty"
TOO_LARGE = "too_large"
ENCODING = "encoding"
TOO_DEEP = "too_deep"
JSON = "json"
SCHEMA = "schema"
SCHEMA_VERSION = "schema_version"


def check_size(value: bytes | None, max_bytes: int | None) -> bytes:
    """The value, if there is one and it is small enough to be parsed at all."""
    if value is None:
        raise SerdeError("the message value is null", NULL_VALUE)
    if not value:
        raise SerdeError("the message value is empty", EMPTY)
    if max_bytes is not None and len(value) > max_bytes:
        raise SerdeError(
            f"the message value is {len(value)} bytes, more than the {max_bytes} accepted "
            "(LYCHEE_MAX_MESSAGE_BYTES)",
            TOO_LARGE,
        )
    return value


def decode_json(value: bytes | None, max_bytes: int | None = None) -> Any:
    raw = check_size(value, max_bytes)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        text = str(exc)
        if "UTF-8" in text or "surrogate" in text:
            raise SerdeError(_utf8_fault(raw, text), ENCODING) from exc
        if "depth" in text or "recursion" in text.lower():
            raise SerdeError(f"JSON nested too deep: {text}", TOO_DEEP) from exc
        raise SerdeError(f"not valid JSON: {text}", JSON) from exc


def _utf8_fault(raw: bytes, parser_said: str) -> str:
    """Where bytes stop being UTF-8 (the parser says "surrogates not allowed" of any bad
    byte); what the parser said when the bytes are UTF-8 (an escaped lone surrogate)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 text: {exc.reason} at byte {exc.start}"
    return f"not valid text: {parser_said}"


def contract_error(err: ContractError) -> SerdeError:
    """A contract violation as a serde error; an unknown schema version gets its own code."""
    kind = SCHEMA_VERSION if any(loc == "schema_version" for loc, _ in err.fields) else SCHEMA
    return SerdeError(str(err), kind)


def decode(value: bytes | None, model: type[M], max_bytes: int | None = None) -> M:
    data = decode_json(value, max_bytes)
    if not isinstance(data, dict):
        raise SerdeError(
            f"invalid {model.__name__}: expected a JSON object, got {type(data).__name__}", SCHEMA
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise contract_error(ContractError.from_validation(model.__name__, exc)) from exc


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json().encode()
