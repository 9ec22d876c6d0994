"""Retrieval metrics computable without an LLM (DESIGN 11.2, 11.4).

LoCoMo: evidence recall of the selected items, by count (`recall@k`) and by token budget
(`recall@B`, the main metric: returning bigger items cannot buy recall). LongMemEval:
`recall_any`, `recall_all` and `ndcg_any` exactly as its official `eval_utils.py`
computes them, so numbers are comparable with published ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workers.tokens import count_tokens

CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo category codes; 5 (adversarial) is excluded from the main evaluation."""

CATEGORY_ORDER: tuple[str, ...] = ("all", "single-hop", "multi-hop", "temporal", "open-domain")

SEPARATOR = "\n"
"""Joins items in the serialized context; each item pays for one."""


@dataclass(frozen=True)
class RankedItem:
    """One evidence item as serialized into the context, with the turns it stands for."""

    text: str
    turn_ids: tuple[str, ...]


@dataclass(frozen=True)
class QuestionResult:
    """One system's reply to one question: what aggregation needs and nothing more.

    `kind` is the question's type when the data types its questions; `sources` names the
    turns behind a pair of statements (`workers.evaluation.pairs`), when the data does."""

    category: str
    gold: frozenset[str]
    items: Sequence[RankedItem]
    latency_ms: float
    kind: str | None = None
    sources: Mapping[str, Sequence[str]] = field(default_factory=dict)


def category_name(code: int) -> str | None:
    """The report name of a LoCoMo category code; None for adversarial or unknown codes."""
    return CATEGORIES.get(code)


def _coverage(items: Iterable[RankedItem], gold: Collection[str]) -> float:
    if not gold:
        raise ValueError("recall is undefined for a question without gold evidence")
    covered: set[str] = set()
    for item in items:
        covered.update(item.turn_ids)
    return len(covered.intersection(gold)) / len(set(gold))


def recall_at_k(items: Sequence[RankedItem], gold: Collection[str], k: int) -> float:
    """Fraction of gold turn ids covered by the provenance of the first k items."""
    return _coverage(items[: max(k, 0)], gold)


def hit_at_k(items: Sequence[RankedItem], gold: Collection[str], k: int) -> float:
    """Any-hit recall: 1.0 when any gold turn id is covered by the first k items.

    What others publish as recall@k or hit@k (the paper's code: hit@10); the mean-fraction
    `recall_at_k` is stricter on questions with several gold turns."""
    return 1.0 if _coverage(items[: max(k, 0)], gold) > 0 else 0.0


def items_within_budget(
    items: Sequence[RankedItem],
    budget_tokens: int,
    count: Callable[[str], int] = count_tokens,
) -> list[RankedItem]:
    """The longest prefix of `items` whose serialized size fits in `budget_tokens`.

    Each item costs `count(text) + count(SEPARATOR)`: its text plus the newline that
    joins it to the next one in the context, counted apart so an item's cost does not
    depend on its neighbours. Selection stops at the first item that would overflow
    (DESIGN 11.2: "taken in order until the next would exceed B"); later, smaller items
    are not used to fill the gap, so a system cannot profit from reordering by size.
    """
    sep = count(SEPARATOR)
    used = 0
    taken: list[RankedItem] = []
    for item in items:
        cost = count(item.text) + sep
        if used + cost > budget_tokens:
            break
        used += cost
        taken.append(item)
    return taken


def recall_at_budget(
    items: Sequence[RankedItem],
    gold: Collection[str],
    budget_tokens: int,
    count: Callable[[str], int] = count_tokens,
) -> float:
    """Fraction of gold turn ids covered by the items that fit in `budget_tokens`."""
    return _coverage(items_within_budget(items, budget_tokens, count), gold)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50 and p95 with numpy's linear interpolation; 0.0 for no values (JSON has no NaN)."""
    if not values:
        return {"p50": 0.0, "p95": 0.0}
    p50, p95 = np.percentile(np.asarray(values, dtype=np.float64), [50, 95])
    return {"p50": float(p50), "p95": float(p95)}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def _recall_by_group(
    groups: Mapping[str, Sequence[QuestionResult]],
    ks: Sequence[int],
    budgets: Sequence[int],
    count: Callable[[str], int],
) -> dict[str, Any]:
    """recall@k, any-hit recall@k and recall@B of each group: means over its questions."""
    return {
        "recall_at_k": {
            g: {str(k): _mean([recall_at_k(r.items, r.gold, k) for r in rs]) for k in ks}
            for g, rs in groups.items()
        },
        "hit_at_k": {
            g: {str(k): _mean([hit_at_k(r.items, r.gold, k) for r in rs]) for k in ks}
            for g, rs in groups.items()
        },
        "recall_at_budget": {
            g: {
                str(b): _mean([recall_at_budget(r.items, r.gold, b, count) for r in rs])
                for b in budgets
            }
            for g, rs in groups.items()
        },
        "counts": {g: len(rs) for g, rs in groups.items()},
    }


def aggregate(
    results: Sequence[QuestionResult],
    ks: Sequence[int] = (5, 10, 15),
    budgets: Sequence[int] = (500, 1000, 2000),
    count: Callable[[str], int] = count_tokens,
) -> dict[str, Any]:
    """Per-category means of recall@k, any-hit recall@k, recall@B, question counts, latency.

    Each category's figure is the mean over its questions ("all": over every question,
    a micro-average like the paper's overall score). Questions without gold evidence
    are left out of recall (DESIGN 11.2) but not of latency. A category without a
    question reports 0.0; `counts` says so, so a 0.0 is never mistaken for a result.
    """
    unknown = {r.category for r in results} - set(CATEGORY_ORDER[1:])
    if unknown:
        raise ValueError(f"unknown categories {sorted(unknown)}; expected {CATEGORY_ORDER[1:]}")
    by_cat: dict[str, list[QuestionResult]] = {c: [] for c in CATEGORY_ORDER}
    for r in results:
        if r.gold:
            by_cat["all"].append(r)
            by_cat[r.category].append(r)
    return {
        **_recall_by_group(by_cat, ks, budgets, count),
        "latency_ms": percentiles([r.latency_ms for r in results]),
    }


def aggregate_by_kind(
    results: Sequence[QuestionResult],
    ks: Sequence[int] = (5, 10, 15),
    budgets: Sequence[int] = (500, 1000, 2000),
    count: Callable[[str], int] = count_tokens,
) -> dict[str, Any]:
    """The recall figures of `aggregate` per question type, types in name order.

    Only questions that carry a type and gold evidence count; with none, every table is
    empty, which tells a file without types from one whose types scored 0.0.
    """
    by_kind: dict[str, list[QuestionResult]] = {}
    for r in sorted((r for r in results if r.kind is not None and r.gold), key=_kind):
        by_kind.setdefault(_kind(r), []).append(r)
    return _recall_by_group(by_kind, ks, budgets, count)


def _kind(result: QuestionResult) -> str:
    return result.kind or ""


# LongMemEval (official src/retrieval/eval_utils.py semantics) ---------------------------


def _unique(ranked: Iterable[str]) -> list[str]:
    """First occurrence of each id: the official code ranks a corpus of distinct ids."""
    return list(dict.fromkeys(ranked))


def recall_any_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if any gold id is in the top k (0.0 for empty gold, like `any([])`)."""
    top = set(_unique(ranked)[:k])
    return float(any(g in top for g in gold))


def recall_all_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if every gold id is in the top k (1.0 for empty gold, like `all([])`)."""
    top = set(_unique(ranked)[:k])
    return float(all(g in top for g in gold))


def _dcg(relevances: Sequence[float], k: int) -> float:
    """The official DCG: rank 1 undiscounted, rank r >= 2 divided by log2(r).

    This is the original Jarvelin-Kekalainen form the LongMemEval code uses, not the
    more common rel/log2(r+1); with binary gains the two differ from rank 2 on.
    """
    rels = list(relevances)[:k]
    if not rels:
        return 0.0
    return rels[0] + sum(rel / math.log2(rank) for rank, rel in enumerate(rels[1:], start=2))


def ndcg_any_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Binary-relevance NDCG@k as LongMemEval computes it.

    The ideal list holds min(k, |gold|) relevant ids (all gold ids are assumed to be in
    the corpus, as they are in the data); 0.0 when there is no gold.
    """
    gold_set = set(gold)
    ideal = _dcg([1.0] * len(gold_set), k)
    if ideal == 0:
        return 0.0
    actual = _dcg([1.0 if r in gold_set else 0.0 for r in _unique(ranked)], k)
    return actual / ideal


def longmemeval_metrics(
    ranked: Sequence[str], gold: Collection[str], ks: Sequence[int]
) -> dict[str, float]:
    """`recall_any@k`, `recall_all@k`, `ndcg_any@k` for each k, keyed as the official logs."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any_at_k(ranked, gold, k)
        out[f"recall_all@{k}"] = recall_all_at_k(ranked, gold, k)
        out[f"ndcg_any@{k}"] = ndcg_any_at_k(ranked, gold, k)
    return out


def mean_metrics(rows: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Key-wise mean over per-question metric dicts (keys missing in a row are skipped)."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            sums.setdefault(key, []).append(value)
    return {key: float(np.mean(vals)) for key, vals in sums.items()}
