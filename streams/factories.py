"""What every stage builds from settings, in one place: the embedder, the chat LLM client, the
query planner and the evidence store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from streams.metrics import LLM_OBSERVER, ObservedEmbedder, observe_embedding_cache
from streams.settings import Settings, llm_configured
from workers.embedding.base import Embedder
from workers.embedding.cache import CachedEmbedder
from workers.embedding.local import LocalEmbedder, bundled_model_info
from workers.store import EvidenceStore

if TYPE_CHECKING:
    import openai

    from workers.llm.policy import RetryPolicy
    from workers.query.adapter import QueryAdapter
    from workers.query.planner import Planner
    from workers.query.scorer import Scorer


def make_embedder(settings: Settings) -> Embedder:
    """Local MiniLM (default, offline) or an OpenAI-compatible embeddings endpoint, with its
    batch sizes and latency recorded as metrics, behind a cache of vectors by text (the
    metrics then count what the model really embeds)."""
    observed = ObservedEmbedder(model_embedder(settings))
    if settings.embedding_cache_entries == 0:
        return observed
    return CachedEmbedder(
        observed, settings.embedding_cache_entries, on_lookup=observe_embedding_cache
    )


def model_embedder(settings: Settings) -> Embedder:
    """The configured model alone: no cache, no metrics (benchmarks time it)."""
    if settings.embedding_provider == "openai":
        import openai

        from workers.embedding.openai_api import OpenAIEmbedder

        base_url = settings.embedding_base_url or settings.llm_base_url
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        client = openai.OpenAI(base_url=base_url, api_key=key, timeout=settings.embedding_timeout_s)
        return OpenAIEmbedder(client, settings.embedding_model, dim=settings.embedding_dim)
    if settings.embedding_backend == "torch":
        return LocalEmbedder(settings.embedding_model_path, settings.embedding_batch_size)
    from workers.embedding.onnx import OnnxEmbedder

    return OnnxEmbedder(
        settings.embedding_model_path,
        settings.embedding_batch_size,
        precision="int8" if settings.embedding_backend == "onnx-int8" else "fp32",
        cache_dir=settings.embedding_onnx_dir,
    )


def make_llm_client(settings: Settings) -> tuple[openai.AsyncOpenAI, str] | None:
    """The configured chat model's client and name, or None when no LLM is configured.

    One client serves every caller of a process; it never retries on its own. The callers
    record calls, errors, latency and tokens through `streams.metrics.LLM_OBSERVER`.
    """
    if not llm_configured(settings):
        return None
    from workers.llm.calls import make_client

    assert settings.llm_base_url and settings.llm_model
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return make_client(settings.llm_base_url, key, settings.llm_timeout_s), settings.llm_model


def llm_policy(settings: Settings, base: RetryPolicy, *, attempts: bool = False) -> RetryPolicy:
    """A caller's retry policy with the configured stream limits (and, for `attempts`, the
    configured number of attempts: the encoder's, whose stage pauses after them)."""
    return base.with_(
        first_token_s=settings.llm_first_token_timeout_s,
        gap_s=settings.llm_token_gap_timeout_s,
        total_s=settings.llm_timeout_s,
        max_attempts=settings.llm_max_attempts if attempts else None,
    )


def make_planner(llm: tuple[openai.AsyncOpenAI, str] | None, settings: Settings) -> Planner:
    """One LLM planning call when an LLM is configured, else the heuristic planner."""
    if llm is None:
        from workers.query.planner import HeuristicPlanner

        return HeuristicPlanner()
    from workers.query.planner.llm_planner import LLMPlanner

    policy = llm_policy(settings, LLMPlanner.policy)
    return LLMPlanner(*llm, policy=policy, observer=LLM_OBSERVER)


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
        uri or settings.lancedb_uri,
        name,
        dim,
        settings.read_consistency_s,
        exact_max_rows=settings.exact_search_max_rows,
        storage_options=settings.lancedb_storage_options,
        snapshot_rows=settings.query_snapshot_rows if snapshots else 0,
    )


def embedding_info(settings: Settings) -> tuple[str, int]:
    """Model name and dimension, without loading a local model."""
    if settings.embedding_provider == "openai":
        if settings.embedding_dim is None:
            emb = make_embedder(settings)
            return emb.model_name, emb.dim
        return settings.embedding_model, settings.embedding_dim
    return bundled_model_info(settings.embedding_model_path, settings.embedding_backend)


def scorer_of(settings: Settings) -> Scorer | None:
    """The query stage's second stage (`LYCHEE_QUERY_SCORER`)."""
    from workers.query.scorer import FITTED_PATH, load_scorer

    return load_scorer(FITTED_PATH) if settings.query_scorer == "fitted" else None


def adapter_of(settings: Settings, embedder: Embedder) -> QueryAdapter | None:
    """The query stage's question-vector adapter (`LYCHEE_QUERY_ADAPTER`). The fitted one
    applies only to the model it was fitted for; a path given for another model is an error."""
    from workers.query.adapter import FITTED_PATH, load_adapter
    from workers.query.errors import AdapterError

    if settings.query_adapter == "off":
        return None
    fitted = settings.query_adapter == "fitted"
    adapter = load_adapter(FITTED_PATH if fitted else Path(settings.query_adapter))
    if adapter.fits(embedder.model_name, embedder.dim):
        return adapter
    if fitted:
        return None
    raise AdapterError(
        f"LYCHEE_QUERY_ADAPTER={settings.query_adapter}: fitted for {adapter.model} "
        f"({adapter.matrix.shape[0]} dimensions), not {embedder.model_name} ({embedder.dim})"
    )
