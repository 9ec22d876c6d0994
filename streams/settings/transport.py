"""Where messages and memories live: the broker, Redis and the evidence store."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from streams.settings.group import Group, config

DAY_S = 24 * 3600
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
STORE_SCHEMES = ("file://", "memory://", "s3://", "s3+ddb://", "gs://", "az://", "db://")


class KafkaSettings(Group):
    """How the stages consume, publish and wait on the broker, and how they meet failures."""

    model_config = config("kafka_")

    bootstrap: str = Field(
        default="127.0.0.1:9092", description="bootstrap servers (comma-separated)"
    )
    idempotence: bool = Field(
        default=True,
        description="prefer an idempotent producer; where the broker gives no producer id "
        "(Tansu 0.6 to aiokafka) the producer falls back to a plain one with one warning",
    )
    max_message_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        alias="LYCHEE_MAX_MESSAGE_BYTES",
        description="input values larger than this are dead-lettered before parsing "
        "(error_type too_large); Kafka's own default limit is about 1 MiB too",
    )
    max_request_bytes: int = Field(
        default=8_388_608,
        ge=1_048_576,
        description="largest message a stage publishes (aiokafka max_request_size); at least "
        "4x max_message_bytes, so that what a stage makes of any accepted input fits",
    )
    topic_partitions: int = Field(
        default=12,
        ge=1,
        alias="LYCHEE_TOPIC_PARTITIONS",
        description="partitions of every topic created",
    )
    topic_replication: int = Field(
        default=1,
        ge=1,
        alias="LYCHEE_TOPIC_REPLICATION",
        description="replication factor of every topic created",
    )
    topic_retention_s: float = Field(
        default=7 * DAY_S,
        gt=0,
        alias="LYCHEE_TOPIC_RETENTION_S",
        description="retention.ms set at creation on exchanges, turns, segments, records, "
        "control and the dead-letter topics: how long message text (also of a forgotten "
        "namespace) can stay in the log",
    )
    request_retention_s: float = Field(
        default=3600.0,
        gt=0,
        alias="LYCHEE_REQUEST_RETENTION_S",
        description="retention.ms set at creation on queries and replies",
    )
    request_timeout_s: float = Field(
        default=30.0,
        alias="LYCHEE_REQUEST_TIMEOUT_S",
        description="the Kafka clients' and the producer's request timeout",
    )
    session_timeout_s: float = Field(
        default=10.0,
        gt=0,
        alias="LYCHEE_SESSION_TIMEOUT_S",
        description="consumer group session: how soon a dead worker's partitions move",
    )
    max_poll_interval_s: float = Field(
        default=7 * DAY_S,
        gt=0,
        alias="LYCHEE_MAX_POLL_INTERVAL_S",
        description="a paused stage (LLM down, 401) stays in its group this long; liveness "
        "is the session timeout's job (heartbeats run while a stage waits; "
        "[why](docs/decisions.md#a-paused-stage-stays-in-its-group))",
    )
    stage_fetch_wait_ms: int = Field(
        default=100,
        ge=1,  # Tansu answers a fetch with a wait of 0 with no data at all
        alias="LYCHEE_STAGE_FETCH_WAIT_MS",
        description="broker fetch wait of the segmenter, encoder and indexer stages "
        "([why](docs/decisions.md#tansus-fetch-wait))",
    )
    query_fetch_wait_ms: int = Field(
        default=10,
        ge=1,  # Tansu answers a fetch with a wait of 0 with no data at all
        alias="LYCHEE_QUERY_FETCH_WAIT_MS",
        description="broker fetch wait of the query stage and reply readers",
    )
    transient_max_wait_s: float = Field(
        default=30.0,
        gt=0,
        alias="LYCHEE_TRANSIENT_MAX_WAIT_S",
        description="longest wait between retries of a failure that is not a message's fault",
    )
    pause_log_interval_s: float = Field(
        default=60.0,
        gt=0,
        alias="LYCHEE_PAUSE_LOG_INTERVAL_S",
        description="a paused stage says why once per this interval",
    )
    systemic_streak: int = Field(
        default=3,
        ge=2,
        alias="LYCHEE_SYSTEMIC_STREAK",
        description="this many messages in a row failing with the same error (same type, "
        "raised at the same place), from more than one namespace, pause the stage instead of "
        "being dead-lettered",
    )
    forget_timeout_s: float = Field(
        default=300.0,
        gt=0,
        alias="LYCHEE_FORGET_TIMEOUT_S",
        description="how long a client's forget waits for every stage's receipt",
    )

    @model_validator(mode="after")
    def _outputs_fit(self) -> KafkaSettings:
        if self.max_request_bytes < 4 * self.max_message_bytes:
            raise ValueError(
                f"LYCHEE_KAFKA_MAX_REQUEST_BYTES ({self.max_request_bytes}) must be at least 4x "
                f"LYCHEE_MAX_MESSAGE_BYTES ({self.max_message_bytes}): a stage's output (a turn "
                "with its embedding, a segment, a dead letter with its headers) must fit"
            )
        return self


class RedisSettings(Group):
    """Per-session stream state, the encoder's context and cache, token counters."""

    model_config = config("redis_")

    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="segmenter state, encoder context, cache and token counters, the indexer's "
        "marks of what it wrote (the query service keeps its snapshots by them)",
    )

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: str) -> str:
        """Checked when read, not at a worker's first command: the error names the setting."""
        if f"{urlsplit(url).scheme}://" not in REDIS_SCHEMES:
            raise ValueError(f"a Redis URL starts with {', '.join(REDIS_SCHEMES)}")
        return url


class StoreSettings(Group):
    """The LanceDB evidence store: where it is, how fresh a reader is, how it is kept."""

    model_config = config("lancedb_")

    uri: str = Field(
        default="./data/lancedb",
        description="local path or object storage URI (s3://bucket/prefix)",
    )

    @field_validator("uri")
    @classmethod
    def _store_uri(cls, uri: str) -> str:
        """A local path, or a URI of a storage LanceDB writes to."""
        if "://" in uri and f"{urlsplit(uri).scheme}://" not in STORE_SCHEMES:
            raise ValueError(f"a local path or a URI starting with {', '.join(STORE_SCHEMES)}")
        return uri

    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="object-store options of an s3:// (gs://, az://) URI, as JSON: "
        "aws_endpoint, aws_access_key_id, aws_secret_access_key, aws_region, allow_http, ...",
    )
    read_consistency_s: float = Field(
        default=0.0,
        ge=0,
        alias="LYCHEE_READ_CONSISTENCY_S",
        description="how stale a reader's view of LanceDB may be (0: always latest)",
    )
    ann_min_rows: int = Field(
        default=100_000,
        ge=256,
        alias="LYCHEE_ANN_MIN_ROWS",
        description="build an ANN (HNSW) index once a table has this many rows",
    )
    exact_search_max_rows: int = Field(
        default=20_000,
        ge=0,
        alias="LYCHEE_EXACT_SEARCH_MAX_ROWS",
        description="a namespace up to this many rows is searched exactly even where an ANN "
        "index exists ([why](docs/decisions.md#small-namespaces-are-searched-exactly-even-where-"
        "an-ann-index-exists))",
    )
    optimize_interval_s: float = Field(
        default=60.0,
        gt=0,
        alias="LYCHEE_OPTIMIZE_INTERVAL_S",
        description="how often the indexer compacts tables and refreshes their indexes",
    )
    optimize_budget_s: float = Field(
        default=60.0,
        gt=0,
        alias="LYCHEE_OPTIMIZE_BUDGET_S",
        description="index builds and compactions of one tick: no table is started after this",
    )
    retention_days: float | None = Field(
        default=None,
        gt=0,
        alias="LYCHEE_RETENTION_DAYS",
        description="turns and records whose conversation date is older than this are removed "
        "for good on the optimize timer (unset: kept forever)",
    )
