"""`python -m tests.evals.compare BEFORE AFTER`: two recall dumps of the same questions, paired.

Over the dev split's 760 questions a change that moves recall@10 by 0.007 is about five
questions' worth, and a category like open-domain (44 questions) moves 0.011 with half of
one. This prints, per category, each dump's recall and their difference with a 95 %
interval from a paired bootstrap: questions drawn with replacement, the same draw scored
for both dumps, so what the two share cancels. It also counts the questions that gained and
lost and gives the difference per conversation, which says whether one conversation carries
a change. An interval that holds 0 says the change is not told apart from the luck of which
questions were asked; it does not say how the change would do on other conversations.

The dumps are `python -m tests.evals.recall_probe --dump FILE` or `lychee bench locomo
--dump FILE` outputs (every reply's evidence with the question's gold turns, under the data
file's namespaces), of the same data file, in the same order: two stack runs, two
in-process runs, or one of each.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from schemas import EvidenceItem
from streams.bench.errors import BenchError
from streams.bench.locomo import evidence_line
from workers.evaluation.metrics import CATEGORY_ORDER, RankedItem, recall_at_budget, recall_at_k

RESAMPLES = 4000
Metric = Callable[[Sequence[RankedItem], frozenset[str]], float]


class DumpMismatch(BenchError):
    """The two dumps do not hold the same questions in the same order."""


@dataclass(frozen=True)
class Pair:
    """One question as both dumps answered it."""

    namespace: str
    category: str
    gold: frozenset[str]
    before: list[RankedItem]
    after: list[RankedItem]


FIELDS = ("namespace", "question", "category", "gold", "items")


def load(path: Path) -> list[dict[str, Any]]:
    """A dump's replies, each checked for the fields a comparison reads."""
    try:
        rows = json.loads(path.read_text())
    except ValueError as exc:  # not UTF-8, or not JSON
        raise DumpMismatch(f"{path}: not JSON ({exc})") from exc
    if not isinstance(rows, list):
        raise DumpMismatch(f"{path}: not a dump of replies (recall_probe or bench locomo --dump)")
    for i, row in enumerate(rows):
        missing = [f for f in FIELDS if not isinstance(row, dict) or f not in row]
        if missing:
            raise DumpMismatch(f"{path}: reply {i} has no {', '.join(missing)}")
        if not all(isinstance(row[f], list) for f in ("gold", "items")):
            raise DumpMismatch(f"{path}: reply {i}: gold and items must be lists")
    return rows


def _items(row: dict[str, Any]) -> list[RankedItem]:
    return [evidence_line(EvidenceItem.model_validate(i)) for i in row["items"]]


def paired(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Pair]:
    """The questions with gold turns, each with both dumps' evidence."""
    if len(before) != len(after):
        raise DumpMismatch(f"{len(before)} questions against {len(after)}")
    pairs = []
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        if (b["namespace"], b["question"]) != (a["namespace"], a["question"]):
            raise DumpMismatch(
                f"question {i}: {b['namespace']} {b['question']!r} against "
                f"{a['namespace']} {a['question']!r}"
            )
        if b["gold"]:  # recall is undefined without gold turns
            gold = frozenset(b["gold"])
            pairs.append(Pair(b["namespace"], b["category"], gold, _items(b), _items(a)))
    return pairs


def per_question(pairs: Sequence[Pair], metric: Metric) -> tuple[np.ndarray, np.ndarray]:
    """Each question's metric in the before and after dump."""
    before = np.array([metric(p.before, p.gold) for p in pairs], dtype=np.float64)
    after = np.array([metric(p.after, p.gold) for p in pairs], dtype=np.float64)
    return before, after


def interval(
    diffs: np.ndarray, rng: np.random.Generator, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """95 % paired-bootstrap interval of the mean difference."""
    if len(diffs) == 0:
        return 0.0, 0.0
    means = diffs[rng.integers(0, len(diffs), (resamples, len(diffs)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def metrics(ks: Sequence[int], budgets: Sequence[int]) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for k in ks:
        out[f"R@{k}"] = partial(recall_at_k, k=k)
    for b in budgets:
        out[f"R@{b} tok"] = partial(recall_at_budget, budget_tokens=b)
    return out


def report(
    pairs: Sequence[Pair],
    ks: Sequence[int] = (10,),
    budgets: Sequence[int] = (1000,),
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[str]:
    """The comparison, one line per metric and category, then per conversation."""
    lines = []
    namespaces = sorted({p.namespace for p in pairs})
    for name, metric in metrics(ks, budgets).items():
        before, after = per_question(pairs, metric)
        diffs = after - before
        for cat in CATEGORY_ORDER:
            mask = np.array([cat == "all" or p.category == cat for p in pairs], dtype=bool)
            if not mask.any():
                continue
            lo, hi = interval(diffs[mask], np.random.default_rng(seed), resamples)
            d = diffs[mask]
            lines.append(
                f"{name:<11} {cat:<12} n={int(mask.sum()):<4} {before[mask].mean():.3f} -> "
                f"{after[mask].mean():.3f}  diff {d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}]  "
                f"gained {int((d > 0).sum())}, lost {int((d < 0).sum())}"
            )
        per = "  ".join(
            f"{ns} {diffs[[p.namespace == ns for p in pairs]].mean():+.4f}" for ns in namespaces
        )
        lines.append(f"{name:<11} by conversation: {per}")
    return lines


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--k", default="10", help="item counts, comma-separated")
    parser.add_argument("--budgets", default="1000", help="token budgets, comma-separated")
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        pairs = paired(load(args.before), load(args.after))
    except (DumpMismatch, ValidationError, OSError) as exc:
        parser.error(f"cannot pair {args.before} with {args.after}: {exc}")
    for line in report(pairs, _ints(args.k), _ints(args.budgets), args.resamples, args.seed):
        print(line)


if __name__ == "__main__":
    main()
