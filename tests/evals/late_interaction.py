"""Late interaction over MiniLM's token vectors, measured as a feature of the second stage.

ColBERT-style scoring without ColBERT weights: the bundled MiniLM's contextual token vectors
of the question (content words only) and of an item, each question token matched to its
most similar item token, the mean of those maxima. The store keeps one pooled vector per
row, so serving it would need a forward pass over every led candidate's text per request;
`cost_ms` measures that pass. `python -m tests.evals.fit_scorer DUMP --late-interaction`
reports both (docs/notes/issue25.md, round 3).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from workers.embedding.local import LocalEmbedder
from workers.vocabulary import QUESTION_STOPWORDS, SIMILARITY_STOPWORDS

_STOP = QUESTION_STOPWORDS | SIMILARITY_STOPWORDS


class TokenVectors:
    """The bundled MiniLM's contextual token vectors, unit length, word pieces kept."""

    def __init__(self, model_path: str | None = None) -> None:
        self.model: Any = LocalEmbedder(model_path).model  # loaded offline, as the stages do

    def __call__(self, texts: Sequence[str], content_only: bool = False) -> list[np.ndarray]:
        """One matrix per text; `content_only` also drops stopword pieces (for questions)."""
        vectors = []
        special = {self.model.tokenizer.cls_token, self.model.tokenizer.sep_token}
        for out in self.model.encode(list(texts), output_value=None, batch_size=64):
            n = int(out["attention_mask"].sum())  # the batch pads every text to its longest
            pieces = self.model.tokenizer.convert_ids_to_tokens(out["input_ids"][:n].tolist())
            m = out["token_embeddings"][:n].float().numpy()
            keep = [
                i
                for i, p in enumerate(pieces)
                if p not in special and re.search(r"\w", p) and not (content_only and p in _STOP)
            ]
            m = m[keep] if keep else m
            vectors.append(m / (np.linalg.norm(m, axis=1, keepdims=True) + 1e-9))
        return vectors


def maxsim(question: np.ndarray, item: np.ndarray) -> float:
    """Mean over the question's tokens of the best cosine with any of the item's tokens."""
    return float((question @ item.T).max(axis=1).mean())


def columns(dump: list[dict[str, Any]], vectors: TokenVectors) -> list[np.ndarray]:
    """Each question's MaxSim with each of its dumped items (each distinct text encoded once)."""
    texts = sorted({i["text"] for q in dump for i in q["items"]})
    items = dict(zip(texts, vectors(texts), strict=True))
    questions = vectors([q["question"] for q in dump], content_only=True)
    return [
        np.asarray([maxsim(qv, items[i["text"]]) for i in q["items"]])
        for q, qv in zip(dump, questions, strict=True)
    ]


def cost_ms(dump: list[dict[str, Any]], vectors: TokenVectors, pool: int) -> list[float]:
    """What one request would pay: the question and its first `pool` items through MiniLM."""
    spent = []
    for q in dump:
        start = time.perf_counter()
        vectors([q["question"]], content_only=True)
        vectors([i["text"] for i in q["items"][:pool]])
        spent.append((time.perf_counter() - start) * 1000)
    return spent
