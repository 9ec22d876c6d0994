"""What every stage builds from settings, in one place: the embedder, the chat LLM client, the
query planner and the evidence store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from streams.metrics import LLM_OBSERVER, ObservedEmbedder, observe_embedding_cache
from streams.settings import Settings
from workers.embedding.base import Embedder
from workers.embedding.bounded import BoundedEmbedder, BoundedModel
from workers.embedding.cache import CachedEmbedder
from workers.embedding.local import LocalEmbedder, bundled_model_info
from workers.embedding.model import PRECISION_OF, chosen_backend
from workers.query.multiroute import RecallConfig
from workers.store import EvidenceStore

if TYPE_CHECKING:
    import openai

    from workers.llm.policy import RetryPolicy
    from workers.query.adapter import QueryAdapter
    from workers.query.planner import Planner
    from workers.query.scorer import Scorer

log = structlog.get_logger("lychee.factories")


def make_embedder(settings: Settings, threads: int = 0) -> Embedder:
    """Local MiniLM (default, offline) or an OpenAI-compatible embeddings endpoint, with its
    batch sizes and latency recorded as metrics, behind a cache of vectors by text (the
    metrics then count what the model really embeds). `threads`: a local model's threads
    when `embedding.threads` is unset (0: one per core)."""
    observed = ObservedEmbedder(model_embedder(settings, threads))
    if settings.embedding.cache_entries == 0:
        return observed
    return CachedEmbedder(
        observed, settings.embedding.cache_entries, on_lookup=observe_embedding_cache
    )


def model_embedder(settings: Settings, threads: int = 0) -> Embedder:
    """The configured model alone: no cache, no metrics (benchmarks time it); each text cut to
    what the model can be given (`workers.embedding.bounded`)."""
    return BoundedEmbedder(_backend(settings, threads))


def _backend(settings: Settings, threads: int) -> BoundedModel:
    if settings.embedding.provider == "openai":
        import openai

        from workers.embedding.openai_api import OpenAIEmbedder

        base_url = settings.embedding.base_url or settings.llm.base_url
        key = settings.llm.api_key.get_secret_value() if settings.llm.api_key else "not-needed"
        client = openai.OpenAI(base_url=base_url, api_key=key, timeout=settings.embedding.timeout_s)
        return OpenAIEmbedder(client, settings.embedding.model, dim=settings.embedding.dim)
    backend = chosen_backend(settings.embedding.backend)
    if backend == "torch":
        return LocalEmbedder(settings.embedding.model_path, settings.embedding.batch_size)
    from workers.embedding.onnx import OnnxEmbedder

    return OnnxEmbedder(
        settings.embedding.model_path,
        settings.embedding.batch_size,
        precision=PRECISION_OF[backend],
        cache_dir=settings.embedding.onnx_dir,
        threads=threads if settings.embedding.threads is None else settings.embedding.threads,
    )


def make_llm_client(settings: Settings) -> tuple[openai.AsyncOpenAI, str] | None:
    """The configured chat model's client and name, or None when no LLM is configured.

    One client serves every caller of a process; it never retries on its own. The callers
    record calls, errors, latency and tokens through `streams.metrics.LLM_OBSERVER`.
    """
    if not settings.llm.configured:
        if (why := settings.llm.half_said) is not None:
            log.warning("llm.off", reason=why)
        return None
    from workers.llm.calls import make_client

    assert settings.llm.base_url and settings.llm.model
    key = settings.llm.api_key.get_secret_value() if settings.llm.api_key else None
    return make_client(settings.llm.base_url, key, settings.llm.timeout_s), settings.llm.model


def llm_policy(settings: Settings, base: RetryPolicy, *, attempts: bool = False) -> RetryPolicy:
    """A caller's retry policy with the configured stream limits (and, for `attempts`, the
    configured number of attempts: the encoder's, whose stage pauses after them)."""
    return base.with_(
        first_token_s=settings.llm.first_token_timeout_s,
        gap_s=settings.llm.token_gap_timeout_s,
        total_s=settings.llm.timeout_s,
        max_attempts=settings.llm.max_attempts if attempts else None,
    )


def llm_caller_options(
    settings: Settings, base: RetryPolicy, *, attempts: bool = False
) -> dict[str, Any]:
    """What every LLM caller is built with from settings: its retry policy (`llm_policy`)
    and the configured context window."""
    return {
        "policy": llm_policy(settings, base, attempts=attempts),
        "context_tokens": settings.llm.context_tokens,
    }


def make_planner(llm: tuple[openai.AsyncOpenAI, str] | None, settings: Settings) -> Planner:
    """One LLM planning call when an LLM is configured, else the heuristic planner."""
    if llm is None:
        from workers.query.planner import HeuristicPlanner

        return HeuristicPlanner()
    from workers.query.planner.llm_planner import LLMPlanner

    options = llm_caller_options(settings, LLMPlanner.policy)
    budget = settings.query.plan_timeout_s
    return LLMPlanner(*llm, **options, observer=LLM_OBSERVER, budget_s=budget)


def open_store(
    settings: Settings,
    embedder: Embedder | None = None,
    uri: str | None = None,
    snapshots: bool = False,
) -> EvidenceStore:
    """The evidence store at `uri` (default: the configured one). It needs the embedding
    model's name and dimension, taken from `embedder` when one is loaded already.
    `snapshots`: keep small namespaces in memory (the query service's reads)."""
    name, dim = (embedder.model_name, embedder.dim) if embedder else embedding_info(settings)
    return EvidenceStore(
        uri or settings.store.uri,
        name,
        dim,
        settings.store.read_consistency_s,
        exact_max_rows=settings.store.exact_search_max_rows,
        storage_options=settings.store.storage_options,
        snapshot_rows=settings.query.snapshot_rows if snapshots else 0,
        passage_tokens=settings.indexer.passage_tokens,
    )


def recall_config(settings: Settings) -> RecallConfig:
    """The query service's recall as configured."""
    return RecallConfig(
        turn_window=settings.query.turn_window, window_tokens=settings.query.window_tokens
    )


def embedding_info(settings: Settings) -> tuple[str, int]:
    """Model name and dimension, without loading a local model."""
    if settings.embedding.provider == "openai":
        if settings.embedding.dim is None:
            emb = make_embedder(settings)
            return emb.model_name, emb.dim
        return settings.embedding.model, settings.embedding.dim
    return bundled_model_info(settings.embedding.model_path, settings.embedding.backend)


def scorer_of(settings: Settings) -> Scorer | None:
    """The query stage's second stage (`LYCHEE_QUERY_SCORER`): None when off."""
    from workers.query.scorer import load_scorer

    return None if settings.query.scorer == "off" else load_scorer(Path(settings.query.scorer))


def adapter_of(settings: Settings, embedder: Embedder) -> QueryAdapter | None:
    """The query stage's question-vector adapter (`LYCHEE_QUERY_ADAPTER`): None when off. An
    adapter applies only to the model it was fitted for; one for another model is an error."""
    from workers.query.adapter import load_adapter
    from workers.query.errors import AdapterError

    if settings.query.adapter == "off":
        return None
    adapter = load_adapter(Path(settings.query.adapter))
    if adapter.fits(embedder.model_name, embedder.dim):
        return adapter
    raise AdapterError(
        f"LYCHEE_QUERY_ADAPTER={settings.query.adapter}: fitted for {adapter.model} "
        f"({adapter.matrix.shape[0]} dimensions), not {embedder.model_name} ({embedder.dim})"
    )
