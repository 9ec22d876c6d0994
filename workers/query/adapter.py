"""A linear map of question vectors toward the statements that answer them.

A question and the turn that answers it are worded differently (a question asks "what ...?",
its answer states "I did ..."), and a sentence embedding model trained on symmetric pairs
places a question nearer other questions and other mentions of its names than the answer.
The adapter moves a question's vector by `v + v @ A`, renormalized, with `A` fitted on a
split's questions and the turns that answer them (a contrastive loss over each
conversation's turns, ridge-penalized toward the identity; `tests.evals.fit_adapter` writes
the file, `LYCHEE_QUERY_ADAPTER` names it). Only question vectors move: stored vectors stay
as they were embedded, so no re-index, and switching it off restores the plain model's
geometry. It is off by default: held back, it gains too little recall to earn its place
(docs/decisions.md).

The matrix is fitted for one embedding model; for any other model it does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workers.embedding.model import plain_model_name
from workers.query.errors import AdapterError


@dataclass(frozen=True)
class QueryAdapter:
    model: str  # the embedding model the matrix was fitted for
    matrix: np.ndarray  # (dim, dim): the shift `A` in `v + v @ A`

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        moved = vectors + vectors @ self.matrix
        norms = np.linalg.norm(moved, axis=-1, keepdims=True)
        return np.asarray(moved / np.maximum(norms, 1e-12), dtype=vectors.dtype)

    def fits(self, model_name: str, dim: int) -> bool:
        """Fitted for this model (its int8 export included: the same geometry, rounded)."""
        return self.matrix.shape == (dim, dim) and plain_model_name(model_name) == self.model

    def save(self, path: Path, provenance: Mapping[str, str] | None = None) -> None:
        """Write the map; `provenance` (the data, commit and command that fitted it) goes
        beside it as string arrays, which `load_adapter` does not read."""
        extra = {k: np.asarray(v) for k, v in (provenance or {}).items()}
        if {"model", "matrix"} & extra.keys():
            raise ValueError("provenance fields cannot be named model or matrix")
        arrays: dict[str, Any] = {"model": np.asarray(self.model), "matrix": self.matrix, **extra}
        np.savez_compressed(path, **arrays)


def load_adapter(path: Path) -> QueryAdapter:
    try:
        with np.load(path) as f:
            model, matrix = str(f["model"]), np.asarray(f["matrix"], dtype=np.float32)
    except (OSError, KeyError, ValueError) as exc:
        raise AdapterError(f"query adapter {path}: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise AdapterError(f"query adapter {path}: a square matrix, not {matrix.shape}")
    return QueryAdapter(model, matrix)
