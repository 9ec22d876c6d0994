"""What every settings group shares: read once from the environment, frozen, named by rule.

A group's variables are `LYCHEE_<GROUP>_<FIELD>` (the group's `env_prefix`), unless a field
names its own with `alias` (`LYCHEE_MAX_MESSAGE_BYTES` in the Kafka group): the names predate
the groups and stay as users set them. A `.env` file in the working directory fills in what
the environment leaves unset and never overrides a real variable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Self

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "LYCHEE_"


def env_names(group: str) -> Callable[[str], str]:
    """The naming rule of a group: `env_names("kafka_")("bootstrap") == "LYCHEE_KAFKA_BOOTSTRAP"`."""
    return lambda field: f"{PREFIX}{group}{field}".upper()


def config(group: str) -> SettingsConfigDict:
    return SettingsConfigDict(
        alias_generator=env_names(group),
        populate_by_name=True,  # code and tests set fields by name; the environment by alias
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        frozen=True,
    )


class Group(BaseSettings):
    """One concern's settings. `Group(_env_file=None, field=value)` in tests."""

    model_config = config("")

    def replaced(self, changes: Mapping[str, Any]) -> Self:
        """A validated copy with `changes` (by field name); the environment is not read again."""
        return self.model_validate({**self.model_dump(), **changes})

    @classmethod
    def variables(cls) -> Iterator[tuple[str, FieldInfo]]:
        """Every environment variable of the group with its field, nested fields by `__`."""
        for name, info in cls.model_fields.items():
            yield env_name(name, info), info


def env_name(name: str, info: FieldInfo) -> str:
    return (info.alias or name).upper()
