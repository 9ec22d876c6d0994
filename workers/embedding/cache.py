"""`CachedEmbedder`: identical texts embedded once."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from workers.embedding.base import Embedder, Matrix, embed_queries


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

    def embed_queries(self, texts: list[str]) -> Matrix:
        """Not cached: a question's vectors are not a stored text's (`embed_queries`), and the
        query service keeps its own."""
        return embed_queries(self.inner, texts)

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
