"""Embedding backends behind one small interface (`Embedder`, in `base`); each backend is a
module of its own, imported by name where it is built."""

from workers.embedding.base import Embedder, Matrix, embed_queries

__all__ = ["Embedder", "Matrix", "embed_queries"]
