"""The recall probe's figures: which questions it asks, the raw-turn baselines asked the
same questions, recall by category, type and statement pair, and the summary it prints.

The baselines are `lychee bench locomo`'s, over the same turns: each turn rendered by
`render_turn_line` and embedded by the probe's own embedder, ranked by cosine (dense) and
by the fusion of that ranking with BM25 (hybrid).
"""

from __future__ import annotations

import time
from typing import Any

from workers.datasets import QA, Conversation
from workers.embedding import Embedder
from workers.evaluation.baselines import conversation_corpus
from workers.evaluation.metrics import (
    CATEGORIES,
    QuestionResult,
    RankedItem,
    aggregate,
    aggregate_by_kind,
)
from workers.evaluation.pairs import pair_counts
from workers.evaluation.report import SystemReport, kind_lines, pair_lines

KS = (1, 5, 10, 15)
BUDGETS = (500, 1000, 2000)
PROBE_BASELINES = ("dense", "hybrid")


def asked(qa: QA, categories: frozenset[str] | None) -> str | None:
    """The category name of a question the probe asks (1-4, or of `categories`), else None."""
    category = CATEGORIES.get(qa.category)
    if category is None or (categories is not None and category not in categories):
        return None
    return category


def result_of(qa: QA, category: str, items: list[RankedItem], ms: float) -> QuestionResult:
    return QuestionResult(category, frozenset(qa.evidence), items, ms, qa.kind, qa.sources)


def baselines(
    convs: list[Conversation],
    embedder: Embedder,
    k: int,
    categories: frozenset[str] | None = None,
    names: tuple[str, ...] = PROBE_BASELINES,
) -> dict[str, list[QuestionResult]]:
    """The raw-turn baselines asked the questions `ask` asks, in the same order: each turn
    rendered by `render_turn_line` and embedded by `embedder`, as `lychee bench locomo` does."""
    out: dict[str, list[QuestionResult]] = {name: [] for name in names}
    for conv in convs:
        chosen = [(qa, c) for qa in conv.qa if (c := asked(qa, categories)) is not None]
        if not chosen:
            continue
        corpus = conversation_corpus(conv, embedder)
        vecs = embedder.embed([qa.question for qa, _ in chosen])
        for (qa, category), vec in zip(chosen, vecs, strict=True):
            for name in names:
                t0 = time.perf_counter()
                items = corpus.ranked(name, qa.question, vec, k)
                ms = (time.perf_counter() - t0) * 1e3
                out[name].append(result_of(qa, category, items, ms))
    return out


def figures(results: list[QuestionResult]) -> dict[str, Any]:
    """Recall by category and, where the data has them, by type and by statement pair."""
    agg = aggregate(results, KS, BUDGETS)
    agg["by_kind"] = aggregate_by_kind(results, KS, BUDGETS)
    agg["pairs"] = pair_counts(results)
    return agg


def summary(agg: dict[str, Any]) -> list[str]:
    """What the probe prints: lychee by category, then every system side by side, by
    question type and by statement pair when the data has them."""
    r, b, h = agg["recall_at_k"], agg["recall_at_budget"], agg["hit_at_k"]
    lines = [
        f"records per conversation: {list(agg['records_per_conversation'].values())}",
        f"per turn: records {agg['per_turn']['records']}, evidence nodes {agg['per_turn']['nodes']}",
        f"hit@5 {h['all']['5']:.3f} hit@10 {h['all']['10']:.3f}",
    ]
    for cat in (c for c in r if agg["counts"][c]):
        lines.append(
            f"{cat:<12} n={agg['counts'][cat]:>4} R@1 {r[cat]['1']:.3f} R@5 {r[cat]['5']:.3f} "
            f"R@10 {r[cat]['10']:.3f} R@15 {r[cat]['15']:.3f} | R@500 {b[cat]['500']:.3f} "
            f"R@1000 {b[cat]['1000']:.3f} R@2000 {b[cat]['2000']:.3f} | hit@10 {h[cat]['10']:.3f}"
        )
    lines += [
        f"gold turns by the rank that first covers them: {agg['gold_turn_ranks']}",
        f"items within 1,000 tokens, median: {agg['items_in_1000_tokens']}",
        f"latency {agg['latency_ms']} ask {agg['ask_seconds']}s",
    ]
    systems = {
        name: SystemReport.model_validate(
            {
                **f,
                "accuracy": None,
                "by_kind": f["by_kind"] if f["by_kind"]["counts"] else None,
                "pairs": f["pairs"] or None,
            }
        )
        for name, f in [("lychee", agg), *agg.get("baselines", {}).items()]
    }
    lines += ["", "system         R@10  hit@10  R@1000tok"]
    for name, s in systems.items():
        hit = (s.hit_at_k or {})["all"]["10"]
        lines.append(
            f"{name:<12} {s.recall_at_k['all']['10']:>6.3f} {hit:>7.3f} "
            f"{s.recall_at_budget['all']['1000']:>10.3f}"
        )
    lines += kind_lines(systems)
    if pairs := pair_lines(systems):
        lines += ["", *pairs]
    return lines
