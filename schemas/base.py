"""Common base for every contract: strict, versioned, namespaced."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$")


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            "must be 1-128 characters of letters, digits and . _ : @ + -, starting with a "
            f"letter or digit (got {value!r})"
        )
    return value


# Namespaces and session ids end up in storage filters and Redis keys: a strict
# alphabet keeps them safe to embed there without escaping games.
Name = Annotated[str, AfterValidator(_check_name)]


class Contract(BaseModel):
    """Every message on a topic: frozen, no unknown fields, carries its schema version."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
