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
