"""The embedding interface every stage takes: unit-normalized vectors, one row per text.

Backends, each in its own module: `local` (sentence-transformers over the bundled MiniLM),
`onnx` (the same weights on ONNX Runtime, the default), `openai_api` (an OpenAI-compatible
endpoint); `bounded` cuts each text to what its backend may be given; `cache` embeds a text
once however often turns, records and nodes repeat it; `model` names the bundled weights. Batch calls are faster per text than single calls on
CPU, so callers hand over whole batches.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float32]


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed(self, texts: list[str]) -> Matrix:
        """Unit-normalized embeddings, one row per text."""
        ...


def embed_queries(embedder: Embedder, texts: list[str]) -> Matrix:
    """Vectors of texts that are compared and never stored (a question and its variants):
    a backend that computes them in fewer calls than `embed` does (`embed_queries`, where the
    vector of a stored text must not depend on its company) says so; else `embed`."""
    own = getattr(embedder, "embed_queries", None)
    return embedder.embed(texts) if own is None else own(texts)
