"""Prometheus metrics: every definition in one place, and the few helpers that record them.

Stage code records through small hooks at central points (the guard, dead-lettering, the
publisher, the query handler, the embedder and LLM client factories, the Faust monitor), so
that `workers/` stays free of any metrics library. Every process serves its own registry:
workers on `metrics_port` (0 picks a free port, since several workers of one stage may share
a host), the gateway on its HTTP port. Each registers its endpoint in Redis with a TTL and a
heartbeat, so that `lychee status --json` lists every live endpoint.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import orjson
import structlog
from prometheus_client import (
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.metrics import MetricWrapperBase

from workers.embedding import embed_queries

log = structlog.get_logger("lychee.metrics")

disable_created_metrics()  # no `_created` series: half the output, nothing a dashboard reads

ENDPOINTS_KEY = "lychee:metrics:endpoints"  # sorted set: endpoint JSON -> expiry (epoch s)

_LATENCY_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
_LLM_S = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)  # local: minutes

# -- stages ------------------------------------------------------------------------------------
MESSAGES_IN = Counter(
    "lychee_messages_in_total", "Messages a stage consumed, per topic", ["stage", "topic"]
)
MESSAGES_OUT = Counter(
    "lychee_messages_out_total", "Messages produced and acked, per topic", ["topic"]
)
DEAD_LETTERED = Counter(
    "lychee_messages_dead_lettered_total",
    "Messages sent to a dead-letter topic, per source topic and reason",
    ["stage", "topic", "error_type"],
)
STAGE_SECONDS = Histogram(
    "lychee_stage_batch_seconds",
    "Time a stage took for one batch, from parsed to handled or dead-lettered",
    ["stage"],
    buckets=_LATENCY_S,
)
STAGE_BATCH = Histogram(
    "lychee_stage_batch_size", "Messages per batch a stage handled", ["stage"], buckets=_SIZES
)
CONSUMER_LAG = Gauge(
    "lychee_consumer_lag",
    "Messages behind the partition end (end offset seen at fetch minus committed offset)",
    ["stage", "topic", "partition"],
)
STAGE_PAUSED = Gauge(
    "lychee_stage_paused_since_seconds",
    "Start (unix time) of a pause a stage is in: waiting out a failure that is not a "
    "message's fault (kind transient: a dependency; systemic: our code, a library or the "
    "configuration), by the error's type",
    ["stage", "kind", "error_type"],
)
STAGE_PAUSES = Counter(
    "lychee_stage_pauses_total", "Pauses a stage went into, by kind", ["stage", "kind"]
)
MESSAGES_REPLAYED = Counter(
    "lychee_messages_replayed_total",
    "Messages a stage consumed that `lychee dlq replay` produced again, per topic",
    ["stage", "topic"],
)
DLQ_REPLAYED = Counter(
    "lychee_dlq_replayed_total",
    "Dead letters produced back to their source topic by `lychee dlq replay`",
    ["topic", "error_type"],
)
# -- models ------------------------------------------------------------------------------------
LLM_CALLS = Counter(
    "lychee_llm_calls_total", "Attempts of LLM calls (each retry counts)", ["stage", "model"]
)
LLM_ERRORS = Counter(
    "lychee_llm_errors_total",
    "Failed LLM attempts by reason (http_429, http_4xx, http_5xx, timeout, connection, other)",
    ["stage", "model", "reason"],
)
LLM_RETRIES = Counter(
    "lychee_llm_retries_total", "LLM calls tried again after a retryable failure", ["stage"]
)
LLM_TOKENS = Counter(
    "lychee_llm_tokens_total", "LLM tokens reported by the server", ["stage", "model", "direction"]
)
LLM_SECONDS = Histogram(
    "lychee_llm_call_seconds",
    "LLM attempt latency, first byte sent to last chunk read",
    ["stage", "model"],
    buckets=_LLM_S,
)
LLM_FIRST_TOKEN_SECONDS = Histogram(
    "lychee_llm_first_token_seconds",
    "Time from sending a streamed LLM request to its first token (the prompt is read first)",
    ["stage", "model"],
    buckets=_LLM_S,
)
LLM_OUTPUT_RATE = Histogram(
    "lychee_llm_output_tokens_per_second",
    "Generation speed of each LLM attempt that streamed, after its first token",
    ["stage", "model"],
    buckets=(0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500),
)
LLM_LAST_RATE = Gauge(
    "lychee_llm_last_tokens_per_second",
    "Generation speed of the latest LLM attempt that streamed: slow reads as slow, not down",
    ["stage", "model"],
)
EMBED_BATCH = Histogram(
    "lychee_embedding_batch_size", "Texts per embedding call", ["stage", "model"], buckets=_SIZES
)
EMBED_SECONDS = Histogram(
    "lychee_embedding_seconds", "Embedding call latency", ["stage", "model"], buckets=_LATENCY_S
)
EMBED_CACHE = Counter(
    "lychee_embedding_cache_total", "Texts looked up in the embedding cache", ["stage", "result"]
)
# -- query service -----------------------------------------------------------------------------
QUERIES = Counter(
    "lychee_queries_total", "Requests the query service took, by outcome", ["outcome"]
)
RETRIEVAL_SECONDS = Histogram(
    "lychee_retrieval_seconds",
    "Retrieval latency per step (plan, recall and each recall channel, rerank, selection, "
    "answer, total)",
    ["step"],
    buckets=_LATENCY_S,
)
# -- gateway -----------------------------------------------------------------------------------
GATEWAY_SECONDS = Histogram(
    "lychee_gateway_request_seconds",
    "Gateway latency by route template, method and status",
    ["method", "route", "status"],
    buckets=_LATENCY_S,
)
GATEWAY_IN_FLIGHT = Gauge("lychee_gateway_in_flight", "Gateway requests being served")
GATEWAY_EXCHANGES = Counter(
    "lychee_gateway_exchanges_total",
    "Exchanges the gateway accepted (new) or recognised as re-sent (duplicate)",
    ["outcome"],
)

_process = {"stage": "client"}


def set_stage(stage: str) -> None:
    """Name the stage this process runs; model metrics carry it as their `stage` label."""
    _process["stage"] = stage


def stage() -> str:
    return _process["stage"]


# -- recording helpers -------------------------------------------------------------------------


@contextlib.contextmanager
def timed_batch(stage_name: str, size: int) -> Iterator[None]:
    STAGE_BATCH.labels(stage_name).observe(size)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        STAGE_SECONDS.labels(stage_name).observe(time.perf_counter() - t0)


def pause_started(stage_name: str, kind: str, error_type: str) -> None:
    STAGE_PAUSES.labels(stage_name, kind).inc()
    STAGE_PAUSED.labels(stage_name, kind, error_type).set(time.time())


def pause_ended(stage_name: str, kind: str, error_type: str) -> None:
    with contextlib.suppress(KeyError):
        STAGE_PAUSED.remove(stage_name, kind, error_type)


def observe_reply(outcome: str, timings_ms: dict[str, float] | None = None) -> None:
    """One answered (or dropped) query: its outcome and the latency of each retrieval step."""
    QUERIES.labels(outcome).inc()
    for step, ms in (timings_ms or {}).items():
        RETRIEVAL_SECONDS.labels(step).observe(ms / 1000)


def observe_embedding_cache(hits: int, misses: int) -> None:
    EMBED_CACHE.labels(stage(), "hit").inc(hits)
    EMBED_CACHE.labels(stage(), "miss").inc(misses)


class ObservedEmbedder:
    """An embedder that records batch sizes and latency; everything else is the inner one's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name: str = inner.model_name
        self.dim: int = inner.dim

    def embed(self, texts: list[str]) -> Any:
        return self._observed(self.inner.embed, texts)

    def embed_queries(self, texts: list[str]) -> Any:
        return self._observed(partial(embed_queries, self.inner), texts)

    def _observed(self, embed: Callable[[list[str]], Any], texts: list[str]) -> Any:
        t0 = time.perf_counter()
        out = embed(texts)
        EMBED_SECONDS.labels(stage(), self.model_name).observe(time.perf_counter() - t0)
        EMBED_BATCH.labels(stage(), self.model_name).observe(len(texts))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class LLMMetrics:
    """The LLM callers' observer (`workers.llm.observer.CallObserver`): calls, errors by reason,
    retries, latency, time to first token, tokens/s and the tokens the server reported,
    counted at our own call boundary whatever HTTP library the SDK sends through."""

    def attempt(self, model: str, attempt: Any) -> None:
        labels = (stage(), model)
        LLM_CALLS.labels(*labels).inc()
        LLM_SECONDS.labels(*labels).observe(attempt.seconds)
        streamed = attempt.completion
        if streamed is not None and streamed.first_token_s is not None:
            LLM_FIRST_TOKEN_SECONDS.labels(*labels).observe(streamed.first_token_s)
            if (rate := streamed.tokens_per_s) is not None:
                LLM_OUTPUT_RATE.labels(*labels).observe(rate)
                LLM_LAST_RATE.labels(*labels).set(rate)
        if attempt.failure is not None:
            LLM_ERRORS.labels(*labels, attempt.failure).inc()
            return
        if streamed.prompt_tokens is not None and streamed.completion_tokens is not None:
            LLM_TOKENS.labels(*labels, "input").inc(streamed.prompt_tokens)
            LLM_TOKENS.labels(*labels, "output").inc(streamed.completion_tokens)

    def retry(self, model: str) -> None:
        LLM_RETRIES.labels(stage()).inc()


LLM_OBSERVER = LLMMetrics()


# -- query processes ---------------------------------------------------------------------------

# what a metric was told in a query process: its name here, its label values, the method, the value
Observation = tuple[str, tuple[str, ...], str, float]


class _Kept:
    """A metric of a query process, which serves no registry: what it is told is kept for
    the worker to replay into its own (`replay`)."""

    def __init__(self, name: str, kept: deque[Observation], values: tuple[str, ...] = ()):
        self.name, self.kept, self.values = name, kept, values

    def labels(self, *values: Any) -> _Kept:
        return _Kept(self.name, self.kept, tuple(map(str, values)))

    def inc(self, amount: float = 1) -> None:
        self.kept.append((self.name, self.values, "inc", amount))

    def observe(self, amount: float) -> None:
        self.kept.append((self.name, self.values, "observe", amount))

    def set(self, value: float) -> None:
        self.kept.append((self.name, self.values, "set", value))


def keep_for_replay() -> Callable[[], list[Observation]]:
    """Turn this process's metrics into ones that keep what they are told, and return what
    takes it: a query process's observations reach its worker's /metrics with its replies."""
    kept: deque[Observation] = deque()
    for name, metric in list(globals().items()):
        if isinstance(metric, MetricWrapperBase):
            globals()[name] = _Kept(name, kept)

    def taken() -> list[Observation]:
        return [kept.popleft() for _ in range(len(kept))]

    return taken


def replay(observations: Iterable[Observation]) -> None:
    """What a query process's metrics were told, into this process's registry."""
    for name, values, method, amount in observations:
        metric = globals().get(name)
        if isinstance(metric, MetricWrapperBase) and method in ("inc", "observe", "set"):
            getattr(metric.labels(*values) if values else metric, method)(amount)


# -- serving and registration ------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    stage: str
    url: str
    host: str
    pid: int


def advertised_host(bind_host: str) -> str:
    """The address others reach a server on: the bind address, or this host's for 0.0.0.0."""
    if bind_host not in ("0.0.0.0", "::", ""):
        return bind_host
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


class Registration:
    """Keeps one endpoint listed in Redis while the process lives (a TTL refreshed by a
    daemon thread); a killed process drops out of the list when its TTL passes."""

    def __init__(self, redis_url: str, endpoint: Endpoint, heartbeat_s: float) -> None:
        from redis import Redis

        self.endpoint = endpoint
        self.member = orjson.dumps(asdict(endpoint)).decode()
        self.heartbeat_s = heartbeat_s
        self._redis = Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-registration", daemon=True)

    def start(self) -> Registration:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            try:
                self._redis.zadd(ENDPOINTS_KEY, {self.member: now + 3 * self.heartbeat_s})
                self._redis.zremrangebyscore(ENDPOINTS_KEY, "-inf", now)
            except Exception as exc:  # noqa: BLE001 - Redis down: try again next beat
                log.warning("metrics.register_failed", error=repr(exc))
            self._stop.wait(self.heartbeat_s)

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._redis.zrem(ENDPOINTS_KEY, self.member)
            self._redis.close()


def serve(stage_name: str, settings: Any) -> Registration | None:
    """Serve this process's metrics and register the endpoint; None when metrics are off."""
    set_stage(stage_name)
    if not settings.observability.metrics_enabled:
        return None
    server, _ = start_http_server(
        settings.observability.metrics_port, addr=settings.observability.metrics_host
    )
    port = server.server_port
    host = advertised_host(settings.observability.metrics_host)
    endpoint = Endpoint(stage_name, f"http://{host}:{port}/metrics", host, os.getpid())
    log.info("metrics.serving", url=endpoint.url)
    return register(settings, endpoint)


def register(settings: Any, endpoint: Endpoint) -> Registration:
    return Registration(
        settings.redis.url, endpoint, settings.observability.metrics_heartbeat_s
    ).start()


async def endpoints(redis: Any) -> list[dict[str, Any]]:
    """Every live registered endpoint, ordered by stage and URL."""
    now = time.time()
    raw = await redis.zrangebyscore(ENDPOINTS_KEY, now, "+inf")
    found = [orjson.loads(m) for m in raw]
    return sorted(found, key=lambda e: (e["stage"], e["url"]))
