"""Bytes <-> contracts. Errors name the topic, the field and what is wrong."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas import ContractError
from schemas.errors import LycheeError

M = TypeVar("M", bound=BaseModel)


class SerdeError(LycheeError, ValueError):
    """A message that cannot be decoded or does not satisfy its contract."""

    def __init__(self, reason: str, error_type: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type


def decode_json(value: bytes | None) -> Any:
    if value is None:
        raise SerdeError("empty message value", "empty")
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise SerdeError(f"not valid JSON: {exc}", "json") from exc


def decode(value: bytes | None, model: type[M]) -> M:
    data = decode_json(value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = ContractError.from_validation(model.__name__, exc)
        raise SerdeError(str(err), "schema") from exc


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json().encode()
