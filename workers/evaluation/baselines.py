"""Raw-turn baselines run over the same turns as lychee: dense, BM25 and their fusion.

They are the floor the segment-level memory has to beat (DESIGN 11.2), so they are kept
plain and standard: one document per turn, rendered the way lychee embeds turns, with
the session date in front so date questions have something to match.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import bm25s
import numpy as np
from numpy.typing import NDArray

from schemas import Role
from schemas.exchange import render_turn
from workers.datasets import Conversation
from workers.embedding import Embedder
from workers.evaluation.metrics import RankedItem

RRF_KAPPA = 60
BASELINES: tuple[str, ...] = ("dense", "bm25", "hybrid")


def render_turn_line(
    date: datetime | None, speaker: str | None, text: str, caption: str | None
) -> str:
    """`[8 May 2023] Speaker: text [image: caption]`; no date prefix without a date.

    The body is `schemas.exchange.render_turn`, the exact text lychee embeds, so the
    baselines differ from lychee by their unit of retrieval only.
    """
    body = render_turn(speaker, Role.user, text, caption)
    return f"[{date.day} {date:%B %Y}] {body}" if date else body


def _tokenize(texts: list[str]) -> list[list[str]]:
    """Lowercased word tokens (2+ word characters), Lucene's English stopwords removed."""
    tokens: list[list[str]] = bm25s.tokenize(
        texts, lower=True, stopwords="en", return_ids=False, show_progress=False
    )
    return tokens


class TurnCorpus:
    """The turns of one namespace, searchable three ways.

    `embeddings` holds one unit-normalized row per turn, computed by the caller in one
    batch and shared with whatever else needs them, so nothing is embedded twice.
    """

    def __init__(self, turns: Sequence[tuple[str, str]], embeddings: NDArray[np.float32]) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(turns):
            raise ValueError(
                f"need one embedding row per turn: {len(turns)} turns, "
                f"embeddings of shape {embeddings.shape}"
            )
        self.turn_ids = [tid for tid, _ in turns]
        self.texts = [text for _, text in turns]
        self.embeddings = embeddings
        self._bm25: Any = bm25s.BM25()  # method "lucene": see `bm25_ranking`
        if turns:
            self._bm25.index(_tokenize(self.texts), show_progress=False)

    def __len__(self) -> int:
        return len(self.turn_ids)

    def _items(self, order: Sequence[int], k: int) -> list[RankedItem]:
        return [RankedItem(self.texts[i], (self.turn_ids[i],)) for i in order[: max(k, 0)]]

    def dense_ranking(self, query_vec: NDArray[np.float32]) -> list[int]:
        """Every turn by cosine similarity (dot product of unit vectors), ties by position."""
        if not len(self):
            return []
        scores = self.embeddings @ np.asarray(query_vec, dtype=np.float32).reshape(-1)
        return [int(i) for i in np.argsort(-scores, kind="stable")]

    def bm25_ranking(self, query: str) -> list[int]:
        """Turns matching at least one query term, by Okapi BM25 score, ties by position.

        bm25s's default "lucene" variant (k1 = 1.5, b = 0.75): its IDF,
        log(1 + (N - df + 0.5) / (df + 0.5)), stays positive, whereas Robertson's
        original is clipped to 0 for terms in more than half the documents. In a
        two-person conversation each speaker's name is in about half the turns, and a
        question naming one should still lean towards that speaker's turns.
        Turns with no query term are left out rather than ranked by position, which
        would be an artefact of corpus order, not retrieval.
        """
        if not len(self):
            return []
        vocab: dict[str, int] = self._bm25.vocab_dict
        ids = [vocab[t] for t in _tokenize([query])[0] if t in vocab]
        if not ids:
            return []
        scores = np.asarray(self._bm25.get_scores(ids), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order if scores[i] > 0]

    def hybrid_ranking(self, query: str, query_vec: NDArray[np.float32]) -> list[int]:
        """Reciprocal-rank fusion of the two rankings: sum of 1 / (60 + rank), ranks from 1."""
        scores: dict[int, float] = {}
        for ranking in (self.dense_ranking(query_vec), self.bm25_ranking(query)):
            for rank, i in enumerate(ranking, start=1):
                scores[i] = scores.get(i, 0.0) + 1.0 / (RRF_KAPPA + rank)
        return sorted(scores, key=lambda i: (-scores[i], i))

    def dense(self, query_vec: NDArray[np.float32], k: int) -> list[RankedItem]:
        return self._items(self.dense_ranking(query_vec), k)

    def bm25(self, query: str, k: int) -> list[RankedItem]:
        return self._items(self.bm25_ranking(query), k)

    def hybrid(self, query: str, query_vec: NDArray[np.float32], k: int) -> list[RankedItem]:
        return self._items(self.hybrid_ranking(query, query_vec), k)

    def ranked(
        self, name: str, query: str, query_vec: NDArray[np.float32], k: int
    ) -> list[RankedItem]:
        """The first k items of the baseline called `name` (one of `BASELINES`)."""
        if name == "dense":
            return self.dense(query_vec, k)
        if name == "bm25":
            return self.bm25(query, k)
        if name == "hybrid":
            return self.hybrid(query, query_vec, k)
        raise ValueError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")


def conversation_corpus(conv: Conversation, embedder: Embedder) -> TurnCorpus:
    """Every turn of `conv` as one item, `render_turn_line` of it, embedded by `embedder`."""
    lines = [
        (tid, render_turn_line(ex.session_date, turn.speaker, turn.content, turn.image_caption))
        for ex in conv.exchanges
        for tid, turn in zip(ex.turn_ids(), ex.turns, strict=True)
    ]
    return TurnCorpus(lines, embedder.embed([text for _, text in lines]))
