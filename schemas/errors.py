"""One root for every error the project raises.

Callers catch `LycheeError` for "anything of ours"; each specific error also keeps the
built-in base that says what kind of failure it is (a bad message is a `ValueError`, a
reply timeout a `TimeoutError`), so code that knows only the built-ins still works.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


class LycheeError(Exception):
    """Root of the project's errors."""


class ContractError(LycheeError, ValueError):
    """A message that does not satisfy its contract; `fields` names what is wrong."""

    def __init__(self, contract: str, fields: list[tuple[str, str]]) -> None:
        self.contract = contract
        self.fields = fields
        detail = "; ".join(f"{loc or '<root>'}: {msg}" for loc, msg in fields)
        super().__init__(f"invalid {contract}: {detail}")

    @classmethod
    def from_validation(cls, contract: str, exc: ValidationError) -> ContractError:
        fields = [
            (".".join(str(p) for p in err["loc"]), validation_reason(err)) for err in exc.errors()
        ]
        return cls(contract, fields)


def validation_reason(err: Mapping[str, Any]) -> str:
    """A validation error's message in the project's words: the validation library's own
    prefix dropped ("Value error, ..."), and a number too large for it to read said so."""
    if err["type"] == "int_parsing_size":
        return "a number far larger than any this field takes"
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")
