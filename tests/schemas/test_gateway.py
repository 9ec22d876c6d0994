"""The gateway's request models refuse at the door what the contract would refuse later,
after earlier exchanges of the same request were queued."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from schemas.base import MAX_SEQ, METADATA_MAX_DEPTH
from schemas.gateway import ExchangeIn

TURNS = [{"role": "user", "content": "hello"}]


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("fields", "where", "says"),
    [
        ({"seq": MAX_SEQ + 1}, "seq", "less than or equal to"),
        ({"metadata": nested(METADATA_MAX_DEPTH + 1)}, "metadata", "levels deep"),
    ],
)
def test_exchange_in_refuses_what_the_contract_refuses(
    fields: dict[str, Any], where: str, says: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ExchangeIn.model_validate({"session_id": "s1", "turns": TURNS, **fields})
    (error,) = caught.value.errors()
    assert error["loc"][0] == where and says in error["msg"]


def test_exchange_in_takes_the_contracts_largest_values() -> None:
    ex = ExchangeIn.model_validate(
        {"session_id": "s1", "turns": TURNS, "seq": MAX_SEQ, "metadata": nested(16)}
    )
    assert ex.seq == MAX_SEQ
