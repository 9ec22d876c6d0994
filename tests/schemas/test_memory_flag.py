"""`Turn.memory`: the contracts that carry it say so by their version, and a turn that is not
memory is another turn than the same words that are."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from schemas import Exchange, RawTurn, Role, Turn

EXCHANGE_V1 = {
    "schema_version": 1,
    "kind": "exchange",
    "namespace": "a",
    "session_id": "s1",
    "seq": 0,
    "exchange_id": "s1:0",
    "turns": [{"role": "user", "content": "I bought a red kayak."}],
}


def test_a_message_from_before_the_flag_parses_and_its_turns_are_memory() -> None:
    ex = Exchange.model_validate(EXCHANGE_V1)
    assert ex.schema_version == 1 and ex.turns[0].memory
    assert Exchange.latest_version == RawTurn.latest_version == 2
    made = Exchange.model_validate({**EXCHANGE_V1, "schema_version": 2})
    assert made.model_dump()["turns"][0]["memory"] is True
    with pytest.raises(ValidationError, match="unsupported schema_version 3"):
        Exchange.model_validate({**EXCHANGE_V1, "schema_version": 3})


def test_the_same_words_not_memory_are_another_turn() -> None:
    said = Turn(role=Role.user, content="I bought a red kayak.")
    assert said.model_copy(update={"memory": False}).digest() != said.digest()
    assert Turn(role=Role.user, content="I bought a red kayak.").digest() == said.digest()
