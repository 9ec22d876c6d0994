"""The four stages' own settings: segmenter, encoder, indexer and query service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from schemas.query import Ablation
from schemas.records import NodeType
from streams.settings.group import Group, config
from workers.query.windows import WINDOW_TOKENS
from workers.segmenter.params import SegmenterParams
from workers.text.passages import PASSAGE_TOKENS

DAY_S = 24 * 3600


class SegmenterSettings(Group):
    """Online segmentation by embedding signals (DESIGN §5), its batching and its timers."""

    model_config = config("segmenter_")

    params: SegmenterParams = Field(
        default=SegmenterParams(),
        alias="LYCHEE_SEGMENTER",
        description="every constant of DESIGN §5 (workers/segmenter/params.py), one variable "
        "each: LYCHEE_SEGMENTER__DELTA, __MODE (semantic, fixed_window or eager), "
        '__CALIBRATION ({"center": .., "scale": ..}; unset: the embedding model\'s entry)',
    )
    batch_size: int = Field(default=64, ge=1, description="exchanges embedded together")
    batch_wait_s: float = Field(
        default=0.05, ge=0, description="how long a batch waits for more exchanges"
    )
    idle_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        alias="LYCHEE_IDLE_TIMEOUT_S",
        description="an open segment idle this long is finalized (session_flush)",
    )
    idle_scan_interval_s: float = Field(
        default=5.0,
        gt=0,
        alias="LYCHEE_IDLE_SCAN_INTERVAL_S",
        description="how often the segmenter looks for idle segments",
    )
    ended_session_ttl_s: int = Field(
        default=7 * DAY_S,
        ge=60,
        alias="LYCHEE_ENDED_SESSION_TTL_S",
        description="how long an ended session's tombstone keeps replays fenced",
    )
    outbox_grace_s: float = Field(
        default=10.0,
        ge=0,
        alias="LYCHEE_OUTBOX_GRACE_S",
        description="the timer republishes outbox entries left unpublished for this long",
    )


class EncoderSettings(Group):
    """Segment-level encoding into memory records (DESIGN §6)."""

    model_config = config("encoder_")

    batch_size: int = Field(default=8, ge=1, description="segments per poll")
    cache_ttl_s: int = Field(
        default=7 * DAY_S, ge=60, description="how long encoded output is cached by segment id"
    )
    cross_context: bool = Field(
        default=True,
        description="carry the session's reference context between segments (false: the "
        "paper's no-cross-context ablation)",
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description="a segment's encoding lease in Redis, renewed while the LLM call runs: "
        "another worker handed the segment waits for its batch instead of calling the LLM too",
    )


class IndexerSettings(Group):
    """Writes of turns, records and evidence nodes to the store (DESIGN §7)."""

    model_config = config("indexer_")

    batch_size: int = Field(default=500, ge=1, description="rows per LanceDB commit")
    batch_wait_s: float = Field(
        default=0.25, ge=0, description="how long a batch waits for more rows"
    )
    passage_tokens: int = Field(
        default=PASSAGE_TOKENS,
        ge=16,
        description="a turn longer than this is also stored as passages of at most this many "
        "tokens (cut at its paragraphs, list items, code blocks and tables): evidence shows "
        "the passage a question matches, the whole turn stays one row",
    )
    node_types: Annotated[frozenset[NodeType], NoDecode] = Field(
        default=frozenset(NodeType),
        alias="LYCHEE_INDEX_NODE_TYPES",
        description="evidence-node types the indexer builds and embeds, comma-separated "
        "(entity, topic, entity_topic, temporal, event_frame)",
    )

    @field_validator("node_types", mode="before")
    @classmethod
    def _node_types(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value


class QuerySettings(Group):
    """The query service: plan, recall, fusion, selection (DESIGN §8)."""

    model_config = config("query_")

    concurrency: int = Field(default=4, ge=1, description="requests served at once per worker")
    processes: int = Field(
        default=0,
        ge=0,
        le=64,
        description="query processes per worker, each serving its share of the requests in "
        "flight with its own model and snapshots: 0 one per core (at most 8), 1 the worker's "
        "own process ([why](docs/decisions.md#a-query-worker-serves-from-one-process-per-core))",
    )
    default_timeout_s: float = Field(
        default=15.0, gt=0, description="a search's timeout when the caller gives none"
    )
    max_deadline_s: float = Field(
        default=600.0,
        gt=0,
        description="a request whose deadline is further ahead gets an error reply",
    )
    plan_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="longest wait for an LLM's plan before the heuristic plan is used instead "
        "(a local model busy encoding would otherwise hold every search)",
    )
    snapshot_rows: int = Field(
        default=200_000,
        ge=0,
        description="rows of small namespaces (up to LYCHEE_EXACT_SEARCH_MAX_ROWS) the query "
        "service keeps in memory, least recently used evicted (0: none; "
        "[why](docs/decisions.md#the-query-service-reads-small-namespaces-from-memory))",
    )
    ablation: Ablation | None = Field(
        default=None,
        description="a retrieval ablation for requests that name none (a request's own wins)",
    )
    scorer: str = Field(
        default="off",
        min_length=1,
        description="the second stage where no cross-encoder is set: 'off' (selection's "
        "order), or the path of a linear scorer written by "
        "`python -m tests.evals.fit_scorer DUMP --out PATH`, which moves its most likely items "
        "(the query preset's lead) of selection's top 30 (top k when larger) to the front "
        "([why off](docs/decisions.md#no-fitted-query-adapter-or-scorer-is-served))",
    )
    adapter: str = Field(
        default="off",
        min_length=1,
        description="question vectors moved toward the statements that answer them: 'off' "
        "(the embedding model's own), or the path of an adapter written by "
        "`python -m tests.evals.fit_adapter --data FILE --out PATH` for the embedding model "
        "in use ([why off](docs/decisions.md#no-fitted-query-adapter-or-scorer-is-served))",
    )
    turn_window: int = Field(
        default=1,
        ge=0,
        le=8,
        alias="LYCHEE_TURN_WINDOW",
        description="raw-turn hits expand to this many turns either side (0: single turns); "
        "with an assistant in the session, within the hit's exchange (the message and its reply)",
    )
    window_tokens: int = Field(
        default=WINDOW_TOKENS,
        ge=1,
        description="a raw-turn hit's window takes neighbouring turns (nearest first) only "
        "while it stays within this many tokens",
    )
    reranker_model: str | None = Field(
        default=None,
        alias="LYCHEE_RERANKER_MODEL",
        description="FlagReranker cross-encoder (local path or hub name, e.g. "
        "BAAI/bge-reranker-v2-m3; needs the rerank extra); unset: no rerank",
    )
    reranker_candidates: int = Field(
        default=100,
        ge=1,
        alias="LYCHEE_RERANKER_CANDIDATES",
        description="rerank pool per route: max(this, 4k) (paper App. C.4)",
    )

    @field_validator("scorer", "adapter")
    @classmethod
    def _fitted_file(cls, value: str) -> str:
        if value != "off" and not Path(value).is_file():
            raise ValueError(f"'off' or a fitted file; no file at {value}")
        return value
