"""MiniLM (or any sentence-transformers directory) through sentence-transformers and torch."""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from workers.embedding.base import Matrix
from workers.embedding.bounded import local_input_bytes
from workers.embedding.model import (
    PRECISION_OF,
    bundled_path,
    chosen_backend,
    model_name_of,
    onnx_model_name,
)


class LocalEmbedder:
    """sentence-transformers over a local model directory (default: bundled MiniLM)."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer

        model_path = model_path or bundled_path()
        self._model: Any = SentenceTransformer(model_path, device="cpu")
        self._lock = threading.Lock()  # one forward pass at a time; torch uses the cores
        self.batch_size = batch_size
        self.model_name = model_name_of(model_path)
        # a model that names no length reads what its positions allow: 512 for BERT's kin
        self.max_input_bytes = local_input_bytes(self._model.max_seq_length or 512)
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim) if dim else len(self.embed(["probe"])[0])

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer, for what reads more than pooled vectors."""
        return self._model

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)


def bundled_model_info(model_path: str | None = None, backend: str = "torch") -> tuple[str, int]:
    """Name and dimension of a sentence-transformers directory under `backend`, without
    loading it (the int8 and bf16 backends name their vectors apart, see
    `workers.embedding.model`)."""
    import json
    from pathlib import Path

    model_path = model_path or bundled_path()
    name = model_name_of(model_path)
    backend = chosen_backend(backend)
    if backend in PRECISION_OF:
        name = onnx_model_name(model_path, PRECISION_OF[backend])
    pooling = Path(model_path) / "1_Pooling" / "config.json"
    if pooling.is_file():
        return name, int(json.loads(pooling.read_text())["word_embedding_dimension"])
    return name, LocalEmbedder(model_path).dim
