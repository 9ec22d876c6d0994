"""Configuration: one frozen settings object of groups, one per concern, read once at start-up.

Every group reads its `LYCHEE_*` variables (`streams.settings.group` says how they are
named); the configuration table of docs/configuration.md is written from these models
(`python -m streams.settings.table --write docs/configuration.md`), and a test keeps the two
equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from streams.settings.models import EmbeddingSettings, LLMSettings
from streams.settings.service import GatewaySettings, ObservabilitySettings, StackSettings
from streams.settings.stages import (
    EncoderSettings,
    IndexerSettings,
    QuerySettings,
    SegmenterSettings,
)
from streams.settings.transport import KafkaSettings, RedisSettings, StoreSettings

__all__ = [
    "EmbeddingSettings",
    "EncoderSettings",
    "GatewaySettings",
    "IndexerSettings",
    "KafkaSettings",
    "LLMSettings",
    "ObservabilitySettings",
    "QuerySettings",
    "RedisSettings",
    "SegmenterSettings",
    "Settings",
    "StackSettings",
    "StoreSettings",
]


class Settings(BaseModel):
    """Every group, each read from the environment (and `.env`) when the object is made."""

    model_config = ConfigDict(frozen=True)

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    segmenter: SegmenterSettings = Field(default_factory=SegmenterSettings)
    encoder: EncoderSettings = Field(default_factory=EncoderSettings)
    indexer: IndexerSettings = Field(default_factory=IndexerSettings)
    query: QuerySettings = Field(default_factory=QuerySettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    stack: StackSettings = Field(default_factory=StackSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)

    @classmethod
    def load(cls, env_file: Path | str | None = ".env", **changes: Mapping[str, Any]) -> Settings:
        """Every group read with `env_file` (None: the environment alone), `changes` (by
        group, then field name) over what they read."""
        if unknown := sorted(set(changes) - set(cls.model_fields)):
            raise ValueError(f"no settings group {', '.join(unknown)}")
        groups = {
            name: cast(Any, info.annotation)(_env_file=env_file, **changes.get(name, {}))
            for name, info in cls.model_fields.items()
        }
        return cls.model_validate(groups)

    def replaced(self, **changes: Mapping[str, Any]) -> Settings:
        """A copy with `changes` by group (validated); the environment is not read again."""
        if unknown := sorted(set(changes) - set(type(self).model_fields)):
            raise ValueError(f"no settings group {', '.join(unknown)}")
        groups = {name: getattr(self, name).replaced(c) for name, c in changes.items()}
        return self.model_copy(update=groups)
