"""The second-stage scorer without model weights: a linear model over what recall measured.

Recall hands every candidate to fusion with its channel scores (vector similarities, BM25
scores, the date route), its kind and its text. Reciprocal-rank fusion reads only ranks;
this scorer reads the scores themselves, the candidate's length and how much of the
question's wording and names it holds, and weighs them with coefficients fitted by
logistic regression on a split's recall dump, one conversation held back at a time
(`tests/evals/fit_scorer.py` fits and reports them and writes the file, which names the
data, commit and command that produced it; `LYCHEE_QUERY_SCORER` names the file). It is
off by default: held back, it gains too little recall to earn its place (docs/decisions.md).
Nothing in it names a dataset's people, places or questions: the features are generic, and
the weights are fourteen numbers and a bias. It does not re-rank selection's choice; it moves
its few most likely items to the front (`lead`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from workers.query.errors import ScorerError
from workers.query.presets import Lead
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
PROVENANCE = ("data", "commit", "command", "written_at")


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

    def save(self, path: Path, provenance: Mapping[str, str]) -> None:
        """Write the weights as JSON (floats round-trip exactly) with what produced them:
        at least the `PROVENANCE` fields, so that a file in use can be traced and refitted."""
        missing = [k for k in PROVENANCE if not provenance.get(k)]
        if missing:
            raise ValueError(f"scorer provenance without {', '.join(missing)}")
        body = {
            **provenance,
            "features": list(FEATURES),
            "weights": list(self.weights),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "bias": self.bias,
        }
        path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def load_scorer(path: Path) -> Scorer:
    """The scorer `Scorer.save` wrote to `path`; a file that is missing, is not such JSON, or
    weighs other features than `FEATURES` (in their order) is a `ScorerError` naming it."""
    try:
        body = json.loads(path.read_text())
        named = tuple(body["features"])
        scorer = Scorer(
            tuple(float(w) for w in body["weights"]),
            tuple(float(m) for m in body["mean"]),
            tuple(float(s) for s in body["scale"]),
            float(body["bias"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ScorerError(f"second-stage scorer {path}: {exc!r}") from exc
    if named != FEATURES:
        raise ScorerError(f"second-stage scorer {path}: features {list(named)}, not {FEATURES}")
    if {len(scorer.weights), len(scorer.mean), len(scorer.scale)} != {len(FEATURES)}:
        raise ScorerError(f"second-stage scorer {path}: not {len(FEATURES)} values per field")
    return scorer


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


def lead_order(log_odds: np.ndarray, lead: Lead) -> list[int]:
    """Positions in the new order: the leading few (in their served order), then the rest.

    Moving only a few keeps what selection's route coverage and diversity chose for the
    token budget; reordering everything by the scorer buys hits in the first ten items
    with recall at 1,000 tokens, since it prefers the larger turn windows (see
    docs/decisions.md#the-second-stage-only-leads).
    """
    best = np.argsort(-log_odds, kind="stable")[: lead.items]
    ahead = sorted(int(i) for i in best if log_odds[i] >= lead.log_odds)
    return [*ahead, *(i for i in range(len(log_odds)) if i not in ahead)]


def lead(
    chosen: Sequence[Fused], question: str, temporal_question: bool, scorer: Scorer, how: Lead
) -> list[Fused]:
    """Selection's choice reordered by `lead_order`, each with the scorer's probability
    (`Fused.second`, reported as `scores["second"]`)."""
    if not chosen:
        return []
    terms = question_terms(question)
    x = matrix(
        [
            features(
                terms,
                temporal_question,
                c.kind,
                c.text,
                f.scores(),
                c.kind == "record" and bool(c.date),
            )
            for f in chosen
            for c in (f.candidate,)
        ]
    )
    z = scorer.score(x)
    p = 1.0 / (1.0 + np.exp(-z))
    return [replace(chosen[i], second=round(float(p[i]), 6)) for i in lead_order(z, how)]
