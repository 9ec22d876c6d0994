"""The second-stage scorer without model weights: a linear model over what recall measured.

Recall hands every candidate to fusion with its channel scores (vector similarities, BM25
scores, the date route), its kind and its text. Reciprocal-rank fusion reads only ranks;
this scorer reads the scores themselves, the candidate's length and how much of the
question's wording and names it holds, and weighs them with coefficients fitted by
logistic regression on the LoCoMo dev split, one conversation held back at a time
(`streams/bench/fit_scorer.py` fits and reports them; docs/notes/issue25.md has the held-back
figures). Nothing in it names a dataset's people, places or questions: the features are
generic, and the weights are twelve numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from workers.query.selection import Fused
from workers.vocabulary import QUESTION_STOPWORDS, SIMILARITY_STOPWORDS

CHANNELS = ("node_vector", "record_vector", "turn_vector", "node_text", "record_text", "turn_text")
FEATURES = (
    "fused",  # the fusion's final score (rank-based)
    *(f"{c}" for c in CHANNELS),  # the channel's score, 0 where it did not find the item
    "temporal",  # found by the date route
    "record",  # a memory record (else a raw turn or window)
    "window",  # a window of neighbouring turns
    "log_tokens",  # its size: what an evidence budget pays for
    "words",  # share of the question's content words in its text
    "names",  # share of the question's names in its text
    "dated_for_when",  # a dated item for a question about time
)
_WORD = re.compile(r"[a-z0-9]+")
_NAME = re.compile(r"\b[A-Z][a-zà-ÿ’'-]+")
_STOP = QUESTION_STOPWORDS | SIMILARITY_STOPWORDS
STEM = 5  # words compared by their first letters: "painted" ~ "painting", "feeds" ~ "feed"


@dataclass(frozen=True)
class Scorer:
    """Weights over `FEATURES` (standardized by `mean` and `scale`) and a bias."""

    weights: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    bias: float = 0.0

    def score(self, x: np.ndarray) -> np.ndarray:
        """Log-odds that each row's candidate holds the answer's evidence."""
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return np.asarray(z @ np.asarray(self.weights) + self.bias)


@lru_cache(maxsize=8192)
def _stems(text: str) -> frozenset[str]:
    return frozenset(w[:STEM] for w in _WORD.findall(text.lower()) if w not in _STOP)


def question_terms(question: str) -> tuple[frozenset[str], frozenset[str]]:
    """The question's content-word stems and its names (capitalized words past the first)."""
    names = frozenset(m.group().lower() for m in _NAME.finditer(question) if m.start() > 0)
    return _stems(question), names


def features(
    terms: tuple[frozenset[str], frozenset[str]],
    temporal_question: bool,
    kind: str,
    text: str,
    scores: Mapping[str, float],
    dated: bool,
) -> list[float]:
    """One candidate's feature row, in the order of `FEATURES`."""
    words, names = terms
    stems = _stems(text)
    low = text.lower()
    row = [float(scores.get("final", 0.0))]
    for c in CHANNELS:
        v = float(scores.get(c, 0.0))
        row.append(math.log1p(max(v, 0.0)) if c.endswith("_text") else v)
    row += [
        1.0 if "temporal" in scores else 0.0,
        1.0 if kind == "record" else 0.0,
        1.0 if kind == "window" else 0.0,
        math.log1p(len(text) / 4),
        len(words & stems) / len(words) if words else 0.0,
        sum(n in low for n in names) / len(names) if names else 0.0,
        1.0 if temporal_question and dated else 0.0,
    ]
    return row


def matrix(rows: Sequence[list[float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


def rescore(
    fused: Sequence[Fused], question: str, temporal_question: bool, scorer: Scorer, limit: int
) -> list[Fused]:
    """The fusion's first `limit` candidates with the scorer's probability as their score
    (`Fused.second`), then the rest below them (second stage 0), in fusion order."""
    ranked = sorted(fused, key=lambda f: (-f.fused, -f.rrf, f.item_id))
    head, tail = ranked[:limit], ranked[limit:]
    if not head:
        return ranked
    terms = question_terms(question)
    x = matrix(
        [
            features(
                terms, temporal_question, c.kind, c.text, f.scores(),
                c.kind == "record" and bool(c.date),
            )
            for f in head
            for c in (f.candidate,)
        ]
    )  # fmt: skip
    p = 1.0 / (1.0 + np.exp(-scorer.score(x)))
    return [
        *(replace(f, second=float(v)) for f, v in zip(head, p, strict=True)),
        *(replace(f, second=0.0) for f in tail),
    ]


# `python -m streams.bench.fit_scorer` on the LoCoMo dev split's dump (recall_probe --dump at
# commit bb1d33e, the store of main's encoder); held-back figures in docs/notes/issue25.md
FITTED: Scorer | None = Scorer(
    weights=(0.8247, 0.1474, -0.1302, -0.2336, 0.0288, 0.0516, 0.7366, -0.0041, 0.1166,
             -0.1166, 0.2120, 0.5353, 0.0169, -0.1204),
    mean=(0.6783, 0.8459, 0.4687, 0.0812, 0.4269, 0.8834, 0.1640, 0.0058, 0.8513, 0.1487,
          3.1243, 0.2825, 0.6779, 0.2118),
    scale=(0.1423, 0.3611, 0.2266, 0.1975, 0.3371, 0.6942, 0.4968, 0.0759, 0.3558, 0.3558,
           0.7037, 0.1656, 0.4022, 0.4086),
    bias=-4.2617,
)  # fmt: skip
