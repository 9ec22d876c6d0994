"""`python -m tests.evals.budget_probe DUMP...`: what a request's `token_budget` keeps.

For each recall dump (`python -m tests.evals.recall_probe --dump FILE` or `lychee bench
locomo --dump FILE`) and each budget, two rules applied to every reply's evidence: the
leading items that fit, as the answer's evidence and recall at a budget count them
(`items_that_fit`, DESIGN §11.2), and a request's budget, which passes over an item that
would overflow (`within_budget`). Per rule: the median number of items kept, the mean
fraction of gold turns they cover, the share of questions with one gold turn covered, and
the median and 95th percentile of the time the rule took a reply.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schemas import EvidenceItem
from tests.evals.compare import DumpMismatch, load
from workers.query.serialize import items_that_fit, serialize_context, within_budget

Rule = Callable[[Sequence[EvidenceItem], int], list[EvidenceItem]]


def leading(items: Sequence[EvidenceItem], budget: int) -> list[EvidenceItem]:
    kept = list(items[: items_that_fit(items, budget)])
    serialize_context(kept)  # the context a reply carries: part of what the rule costs
    return kept


def passing_over(items: Sequence[EvidenceItem], budget: int) -> list[EvidenceItem]:
    return within_budget(items, budget)[0]


RULES: dict[str, Rule] = {"leading": leading, "passing over": passing_over}


def figures(rows: list[dict[str, Any]], budget: int, rule: Rule) -> dict[str, float]:
    """The rule over every reply with gold turns: items kept, recall, hit, milliseconds."""
    kept_n, recall, hit, ms = [], [], [], []
    for row in rows:
        gold = set(row["gold"])
        if not gold:
            continue
        items = [EvidenceItem.model_validate(i) for i in row["items"]]
        started = time.perf_counter()
        kept = rule(items, budget)
        ms.append((time.perf_counter() - started) * 1e3)
        covered = {t for item in kept for t in item.turn_ids} & gold
        kept_n.append(len(kept))
        recall.append(len(covered) / len(gold))
        hit.append(1.0 if covered else 0.0)
    if not kept_n:
        raise DumpMismatch("no reply with gold turns")
    return {
        "items": statistics.median(kept_n),
        "recall": statistics.fmean(recall),
        "hit": statistics.fmean(hit),
        "ms_p50": statistics.median(ms),
        "ms_p95": sorted(ms)[int(0.95 * (len(ms) - 1))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", type=Path, nargs="+")
    parser.add_argument("--budgets", default="500,1000", help="token budgets, comma-separated")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    for dump in args.dumps:
        try:
            rows = load(dump)
            for budget in budgets:
                for name, rule in RULES.items():
                    f = figures(rows, budget, rule)
                    print(
                        f"{dump.name} at {budget} tokens, {name}: median {f['items']:g} items, "
                        f"recall {f['recall']:.3f}, hit {f['hit']:.3f}, "
                        f"{f['ms_p50']:.2f} ms a reply (p95 {f['ms_p95']:.2f})"
                    )
        except (DumpMismatch, ValidationError, OSError) as exc:
            parser.error(f"{dump}: {exc}")


if __name__ == "__main__":
    main()
