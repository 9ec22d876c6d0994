"""Configuration: one frozen settings object, read once at start-up.

Environment variables carry the `LYCHEE_` prefix (nested fields use `__`, e.g.
`LYCHEE_SEGMENTER__DELTA=0.55`); a `.env` file in the working directory fills in what
the environment does not set and never overrides a real environment variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.query import Ablation
from workers.segmenter.params import SegmenterParams


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LYCHEE_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
        frozen=True,
    )

    # Kafka
    kafka_bootstrap: str = "127.0.0.1:9092"
    kafka_idempotence: bool = Field(
        default=True,
        description="idempotent producer; off for brokers without InitProducerId (Tansu)",
    )
    topic_partitions: int = Field(default=12, ge=1)
    topic_replication: int = Field(default=1, ge=1)
    request_timeout_s: float = 30.0
    session_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="consumer group session: how soon a dead worker's partitions move",
    )
    # Redis and LanceDB
    redis_url: str = "redis://127.0.0.1:6379/0"
    lancedb_uri: str = "./data/lancedb"
    read_consistency_s: float = Field(
        default=0.0,
        ge=0,
        description="how stale a reader's view of LanceDB may be (0: always latest)",
    )
    # embeddings: local sentence-transformers (a directory; empty = the bundled MiniLM), or an
    # OpenAI-compatible endpoint (`text-embedding-3-small`, the paper's)
    embedding_provider: Literal["local", "openai"] = "local"
    embedding_model_path: str | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_dim: int | None = None
    embedding_batch_size: int = Field(default=64, ge=1)
    # segmenter
    segmenter: SegmenterParams = SegmenterParams()
    idle_timeout_s: float = Field(default=1800.0, gt=0)
    idle_scan_interval_s: float = Field(default=5.0, gt=0)
    ended_session_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    segmenter_batch_size: int = Field(default=64, ge=1)
    segmenter_batch_wait_s: float = Field(default=0.05, ge=0)
    stage_fetch_wait_ms: int = Field(
        default=100, ge=0, description="broker fetch wait of the segmenter and indexer stages"
    )
    # indexer
    indexer_batch_size: int = Field(default=500, ge=1)
    indexer_batch_wait_s: float = Field(default=0.25, ge=0)
    optimize_interval_s: float = Field(default=60.0, gt=0)
    # encoder: an OpenAI-compatible LLM when configured, else the offline extractive encoder
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("LYCHEE_LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_attempts: int = Field(default=5, ge=1)
    encoder_batch_size: int = Field(default=8, ge=1)
    encoder_cache_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    encoder_cross_context: bool = Field(
        default=True, description="carry the session's reference context between segments"
    )
    ann_min_rows: int = Field(
        default=100_000, ge=256, description="build an ANN index once a table has this many rows"
    )
    exact_search_max_rows: int = Field(
        default=20_000, ge=0, description="namespaces up to this size are searched exactly"
    )
    # query service
    query_ablation: Ablation | None = Field(
        default=None, description="a retrieval ablation for requests that name none"
    )
    query_concurrency: int = Field(default=4, ge=1)
    query_default_timeout_s: float = Field(default=15.0, gt=0)
    query_fetch_wait_ms: int = Field(
        default=10, ge=0, description="broker fetch wait of the query stage and reply readers"
    )
    turn_window: int = Field(
        default=1, ge=0, le=8, description="raw-turn hits expand to this many turns either side"
    )
    reranker_model: str | None = Field(
        default=None,
        description="FlagReranker cross-encoder (local path or hub name); off if unset",
    )
    reranker_candidates: int = Field(
        default=100, ge=1, description="rerank pool per route: max(this, 4k) (paper App. C.4)"
    )
    # HTTP gateway and MCP server (`lychee gateway`, `lychee mcp`)
    api_keys_file: Path | None = Field(
        default=None,
        description="JSON file of hashed API keys and their namespaces; unset: loopback only",
    )
    gateway_host: str = "127.0.0.1"
    gateway_port: int = Field(default=8080, ge=0, le=65535)
    gateway_max_in_flight: int = Field(
        default=256, ge=1, description="requests served at once; more wait, then get 503"
    )
    gateway_queue_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a request waits for a slot or its session"
    )
    gateway_max_exchanges: int = Field(default=1000, ge=1, description="exchanges per request")
    gateway_max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    gateway_produce_timeout_s: float = Field(
        default=10.0, gt=0, description="wait for the broker's acks of one add"
    )
    gateway_max_timeout_s: float = Field(
        default=60.0, gt=0, description="the longest search (and wait_for) a caller may ask for"
    )
    seq_ttl_s: int = Field(
        default=30 * 24 * 3600,
        ge=60,
        description="how long a session's exchange ids are remembered for idempotent re-adds",
    )
    mcp_namespace: str | None = Field(
        default=None, description="the namespace MCP tools use when a call names none"
    )
    # Prometheus metrics of workers (the gateway serves /metrics on its own port)
    metrics_enabled: bool = True
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="0: a free port (several workers on one host)"
    )
    metrics_heartbeat_s: float = Field(
        default=10.0, gt=0, description="how often a process re-registers its metrics endpoint"
    )
    # logs
    log_level: str = "INFO"
    log_format: Literal["auto", "json", "console"] = "auto"


def llm_configured(settings: Settings) -> bool:
    return bool(settings.llm_base_url and settings.llm_model)
