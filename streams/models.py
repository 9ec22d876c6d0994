"""The embedding model every stage uses, built from settings in one place."""

from __future__ import annotations

from streams.settings import Settings
from workers.embedding import Embedder, LocalEmbedder, bundled_model_info


def make_embedder(settings: Settings) -> Embedder:
    """Local MiniLM (default, offline) or an OpenAI-compatible embeddings endpoint."""
    if settings.embedding_provider == "openai":
        import openai

        from workers.embedding import OpenAIEmbedder

        base_url = settings.embedding_base_url or settings.llm_base_url
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        client = openai.OpenAI(base_url=base_url, api_key=key, timeout=settings.llm_timeout_s)
        return OpenAIEmbedder(client, settings.embedding_model, dim=settings.embedding_dim)
    return LocalEmbedder(settings.embedding_model_path, settings.embedding_batch_size)


def embedding_info(settings: Settings) -> tuple[str, int]:
    """Model name and dimension, without loading a local model."""
    if settings.embedding_provider == "openai":
        if settings.embedding_dim is None:
            emb = make_embedder(settings)
            return emb.model_name, emb.dim
        return settings.embedding_model, settings.embedding_dim
    return bundled_model_info(settings.embedding_model_path)
