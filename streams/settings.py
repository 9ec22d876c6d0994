"""Configuration: one frozen settings object, read once at start-up.

Environment variables carry the `LYCHEE_` prefix (nested fields use `__`, e.g.
`LYCHEE_SEGMENTER__DELTA=0.55`); a `.env` file in the working directory fills in what
the environment does not set and never overrides a real environment variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from schemas.query import Ablation
from schemas.records import NodeType
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
        description="prefer an idempotent producer; where the broker gives no producer id "
        "(Tansu 0.6 to aiokafka) the producer falls back to a plain one with one warning",
    )
    max_message_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="input values larger than this are dead-lettered before parsing "
        "(error_type too_large); Kafka's own default limit is about 1 MiB too",
    )
    kafka_max_request_bytes: int = Field(
        default=8_388_608,
        ge=1_048_576,
        description="largest message a stage publishes (aiokafka max_request_size); at least "
        "4x max_message_bytes, so that what a stage makes of any accepted input fits",
    )
    topic_partitions: int = Field(default=12, ge=1)
    topic_replication: int = Field(default=1, ge=1)
    request_timeout_s: float = 30.0
    session_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="consumer group session: how soon a dead worker's partitions move",
    )
    max_poll_interval_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="a paused stage (LLM down, 401) stays in its group this long; liveness "
        "is the session timeout's job (heartbeats run while a stage waits)",
    )
    transient_max_wait_s: float = Field(
        default=30.0, gt=0, description="longest wait between retries of a transient failure"
    )
    pause_log_interval_s: float = Field(
        default=60.0, gt=0, description="a paused stage says why once per this interval"
    )
    systemic_streak: int = Field(
        default=3,
        ge=2,
        description="this many messages in a row failing with the same error (same type, "
        "raised at the same place) pause the stage instead of being dead-lettered",
    )
    # Redis and LanceDB
    redis_url: str = "redis://127.0.0.1:6379/0"
    lancedb_uri: str = "./data/lancedb"
    lancedb_storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="object-store options of an s3:// (gs://, az://) LanceDB URI, as JSON: "
        "aws_endpoint, aws_access_key_id, aws_secret_access_key, aws_region, allow_http, ...",
    )
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
    embedding_timeout_s: float = Field(
        default=60.0, gt=0, description="one call to an OpenAI-compatible embeddings endpoint"
    )
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        default="onnx",
        description="local MiniLM runtime: sentence-transformers on torch, or ONNX Runtime on a "
        "model exported from the same weights at first use (fp32: the same vectors; int8: "
        "faster, other vectors, its own model name)",
    )
    embedding_onnx_dir: str | None = Field(
        default=None,
        description="where ONNX exports are cached (empty: ~/.cache/lychee-memory/onnx)",
    )
    embedding_cache_entries: int = Field(
        default=20_000, ge=0, description="LRU of vectors by text, about 1.6 kB each (0: off)"
    )
    # segmenter
    segmenter: SegmenterParams = SegmenterParams()
    idle_timeout_s: float = Field(default=1800.0, gt=0)
    idle_scan_interval_s: float = Field(default=5.0, gt=0)
    ended_session_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    outbox_grace_s: float = Field(
        default=10.0,
        ge=0,
        description="the timer republishes outbox entries left unpublished for this long",
    )
    segmenter_batch_size: int = Field(default=64, ge=1)
    segmenter_batch_wait_s: float = Field(default=0.05, ge=0)
    stage_fetch_wait_ms: int = Field(
        default=100,
        ge=1,  # Tansu answers a fetch with a wait of 0 with no data at all
        description="broker fetch wait of the segmenter and indexer stages",
    )
    # indexer
    index_node_types: Annotated[frozenset[NodeType], NoDecode] = Field(
        default=frozenset(NodeType),
        description="evidence-node types the indexer builds and embeds, comma-separated",
    )
    indexer_batch_size: int = Field(default=500, ge=1)
    indexer_batch_wait_s: float = Field(default=0.25, ge=0)
    optimize_interval_s: float = Field(default=60.0, gt=0)
    optimize_budget_s: float = Field(
        default=60.0,
        gt=0,
        description="index builds and compactions of one tick: no table is started after this",
    )
    topic_retention_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="retention.ms set at creation on exchanges, turns, segments, records, "
        "control and the dead-letter topics: how long message text (also of a forgotten "
        "namespace) can stay in the log",
    )
    request_retention_s: float = Field(
        default=3600.0, gt=0, description="retention.ms set at creation on queries and replies"
    )
    retention_days: float | None = Field(
        default=None,
        gt=0,
        description="turns and records whose conversation date is older than this are removed "
        "for good on the optimize timer (unset: kept forever)",
    )
    # encoder: an OpenAI-compatible LLM when configured, else the offline extractive encoder
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("LYCHEE_LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_first_token_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="longest wait for the first token of a streamed reply: the server reads "
        "the whole prompt first (a local model on a laptop: tens of tokens a second)",
    )
    llm_token_gap_timeout_s: float = Field(
        default=60.0, gt=0, description="longest silence between two chunks of a streamed reply"
    )
    llm_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="total limit of one attempt however steadily it streams: a backstop, "
        "generous since a slow local model writes a segment's records in minutes (each reply "
        "is capped in tokens too); a reply still being written then is not retried",
    )
    llm_max_attempts: int = Field(default=5, ge=1)
    encoder_batch_size: int = Field(default=8, ge=1)
    encoder_cache_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    encoder_cross_context: bool = Field(
        default=True, description="carry the session's reference context between segments"
    )
    encoder_lease_s: float = Field(
        default=30.0,
        gt=0,
        description="a segment's encoding lease in Redis, renewed while the LLM call runs: "
        "another worker handed the segment waits for its batch instead of calling the LLM too",
    )
    ann_min_rows: int = Field(
        default=100_000, ge=256, description="build an ANN index once a table has this many rows"
    )
    exact_search_max_rows: int = Field(
        default=20_000, ge=0, description="namespaces up to this size are searched exactly"
    )
    query_snapshot_rows: int = Field(
        default=200_000,
        ge=0,
        description="rows of small namespaces the query service keeps in memory (0: none)",
    )
    # forgetting
    forget_timeout_s: float = Field(
        default=300.0, gt=0, description="how long a client waits for every stage's receipt"
    )
    # query service
    query_ablation: Ablation | None = Field(
        default=None, description="a retrieval ablation for requests that name none"
    )
    query_concurrency: int = Field(default=4, ge=1)
    query_default_timeout_s: float = Field(default=15.0, gt=0)
    query_max_deadline_s: float = Field(
        default=600.0,
        gt=0,
        description="a request whose deadline is further ahead gets an error reply",
    )
    query_fetch_wait_ms: int = Field(
        default=10,
        ge=1,  # Tansu answers a fetch with a wait of 0 with no data at all
        description="broker fetch wait of the query stage and reply readers",
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
    query_scorer: Literal["fitted", "off"] = Field(
        default="fitted",
        description="the second stage where no cross-encoder is set: a fitted linear scorer "
        "moves its most likely items (the query preset's lead) of selection's top 30 (top k "
        "when larger) to the front, or off (selection's order)",
    )
    query_adapter: str = Field(
        default="fitted",
        min_length=1,
        description="question vectors moved toward the statements that answer them: 'fitted' "
        "(workers/query/adapter.npz, fitted on LoCoMo dev for the bundled MiniLM; not applied "
        "to another embedding model), 'off', or the path of an adapter written by "
        "`python -m tests.evals.fit_adapter --out PATH`",
    )
    # supervision by `lychee up`: a worker that exits is restarted after a backoff that doubles
    # from restart_backoff_s up to restart_backoff_max_s; restart_max_crashes exits within
    # restart_window_s mark its stage failed
    restart_backoff_s: float = Field(default=1.0, gt=0)
    restart_backoff_max_s: float = Field(default=30.0, gt=0)
    restart_max_crashes: int = Field(default=5, ge=1)
    restart_window_s: float = Field(default=300.0, gt=0)
    drain_grace_s: float = Field(
        default=60.0, ge=0, description="how long Ctrl-C lets the stages drain before they stop"
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
    gateway_connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long a call of the gateway or `lychee mcp` waits for the stack while "
        "not connected yet (both start without it and connect on the next call)",
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

    @field_validator("index_node_types", mode="before")
    @classmethod
    def _node_types(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("query_adapter")
    @classmethod
    def _adapter(cls, value: str) -> str:
        if value not in ("fitted", "off") and not Path(value).is_file():
            raise ValueError(f"'fitted', 'off' or an adapter file; no file at {value}")
        return value

    @model_validator(mode="after")
    def _outputs_fit(self) -> Settings:
        if self.kafka_max_request_bytes < 4 * self.max_message_bytes:
            raise ValueError(
                f"kafka_max_request_bytes ({self.kafka_max_request_bytes}) must be at least 4x "
                f"max_message_bytes ({self.max_message_bytes}): a stage's output (a turn with its "
                "embedding, a segment, a dead letter with its headers) must fit"
            )
        return self


def llm_configured(settings: Settings) -> bool:
    return bool(settings.llm_base_url and settings.llm_model)
