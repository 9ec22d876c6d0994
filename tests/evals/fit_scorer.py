"""`python -m tests.evals.fit_scorer DUMP --out PATH`: fit the second stage's weights and lead.

DUMP is `recall_probe --dump` output on a LoCoMo-layout split (with the second stage off):
every question's evidence (100 items) with the scores recall and fusion gave. Each item is
labelled by whether it covers a gold turn and a logistic regression is fitted over
`workers.query.scorer.FEATURES`; then the lead (how many of the scorer's most likely items
go first, and the log-odds they need) is chosen for the first ten items plus the 1,000-token
budget, among the leads that lower no category's budget recall. It prints the figures as
served, re-ranked by the scorer alone, and led, each with the weights and lead fitted on
every conversation and with each conversation's fitted on the others (leave-one-
conversation-out), then the weights and lead fitted on every conversation. `--out PATH`
writes those weights as the product loads them (`LYCHEE_QUERY_SCORER=PATH` serves them), with
the dump, commit and command that produced them; the lead is the served preset's
(`workers.query.presets.SERVED.lead`).

`--late-interaction` adds one feature the product's scorer does not have, MaxSim of the
question's MiniLM token vectors over each item's (`tests.evals.late_interaction`), and
prints what it would buy and what it would cost a request.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from schemas import EvidenceItem
from streams.bench.locomo import evidence_line
from tests.evals.compare import DumpMismatch, load
from tests.evals.provenance import provenance
from workers.evaluation.metrics import QuestionResult, aggregate
from workers.query.presets import SERVED, Lead
from workers.query.scorer import FEATURES, Scorer, features, lead_order, matrix, question_terms

TEMPORAL = "temporal"
LEADS = tuple(Lead(n, z) for n in (1, 2, 3, 4) for z in (-3.0, -2.5, -2.0, -1.5, -1.0))


Rows = tuple[np.ndarray, np.ndarray, list[EvidenceItem]]


def rows_of(q: dict[str, Any], extra: np.ndarray | None = None) -> Rows:
    """Each item's features (then the columns of `extra`), its label, the items."""
    items = [EvidenceItem.model_validate(i) for i in q["items"]]
    terms = question_terms(q["question"])
    when = (q.get("plan") or {}).get("question_type") == TEMPORAL
    x = matrix(
        [features(terms, when, i.kind, i.text, i.scores, bool(i.resolved_date)) for i in items]
    )
    if extra is not None:
        x = np.hstack([x, extra.reshape(len(items), -1)])
    gold = set(q["gold"])
    y = np.asarray([1.0 if gold & set(i.turn_ids) else 0.0 for i in items])
    return x, y, items


def fit(xs: list[np.ndarray], ys: list[np.ndarray], c: float) -> Scorer:
    x, y = np.vstack(xs), np.concatenate(ys)
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    model = LogisticRegression(C=c, max_iter=2000).fit((x - mean) / scale, y)
    return Scorer(
        tuple(float(w) for w in model.coef_[0]),
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        float(model.intercept_[0]),
    )


def evaluate(
    dump: list[dict[str, Any]],
    rows: list[Rows],
    scorers: Mapping[str, Scorer | None],
    novel: bool = False,
    leads: dict[str, Lead] | None = None,
) -> dict[str, Any]:
    """Every question's items re-ranked by its conversation's scorer (None: as served), or,
    with `leads`, led by it (`workers.query.scorer.lead_order`); `novel` drops an item whose
    turns the items before it already cover."""
    results = []
    for q, (x, _, items) in zip(dump, rows, strict=True):
        scorer = scorers[q["namespace"]]
        if scorer is None:
            order: Any = range(len(items))
        elif leads is not None:
            order = lead_order(scorer.score(x), leads[q["namespace"]])
        else:
            order = np.argsort(-scorer.score(x), kind="stable")
        covered: set[str] = set()
        kept = []
        for i in order:
            if not (novel and covered.issuperset(items[i].turn_ids)):
                kept.append(i)
            covered.update(items[i].turn_ids)
        ranked = [evidence_line(items[i]) for i in kept]
        results.append(QuestionResult(q["category"], frozenset(q["gold"]), ranked, 0.0))
    return aggregate(results, (5, 10), (1000,))


def best_lead(
    dump: list[dict[str, Any]], rows: list[Rows], scorers: Mapping[str, Scorer | None]
) -> Lead:
    """The lead with the most recall@10 + recall@1000 tokens that lowers no category's
    recall@1000 tokens below the served order's."""
    convs = {q["namespace"] for q in dump}
    served = evaluate(dump, rows, dict.fromkeys(convs), True)["recall_at_budget"]

    def gain(how: Lead) -> float:
        agg = evaluate(dump, rows, scorers, True, dict.fromkeys(convs, how))
        budget = agg["recall_at_budget"]
        if any(budget[c]["1000"] < served[c]["1000"] for c in served):
            return -1.0
        return float(agg["recall_at_k"]["all"]["10"] + budget["all"]["1000"])

    return max(LEADS, key=gain)


def line(name: str, agg: dict[str, Any]) -> str:
    r, b, h = agg["recall_at_k"], agg["recall_at_budget"], agg["hit_at_k"]
    cats = " ".join(f"{c} {b[c]['1000']:.3f}" for c in b if c != "all")
    return (
        f"{name:<10} R@5 {r['all']['5']:.3f} R@10 {r['all']['10']:.3f} "
        f"R@1000tok {b['all']['1000']:.3f} hit@10 {h['all']['10']:.3f} | {cats}"
    )


def fitted(
    dump: list[dict[str, Any]], rows: list[Rows], c: float
) -> tuple[Scorer, dict[str, Scorer]]:
    """Weights fitted on every conversation, and each conversation's fitted on the others."""
    convs = sorted({q["namespace"] for q in dump})

    def on(keep: set[str]) -> Scorer:
        mine = [r for q, r in zip(dump, rows, strict=True) if q["namespace"] in keep]
        return fit([x for x, _, _ in mine], [y for _, y, _ in mine], c)

    return on(set(convs)), {n: on(set(convs) - {n}) for n in convs}


def held_led(
    dump: list[dict[str, Any]], rows: list[Rows], held_back: dict[str, Scorer]
) -> tuple[dict[str, Any], dict[str, Lead]]:
    """Each conversation led by weights and a lead chosen on the other conversations."""
    leads = {}
    for c in held_back:
        others = [i for i, q in enumerate(dump) if q["namespace"] != c]
        leads[c] = best_lead([dump[i] for i in others], [rows[i] for i in others], held_back)
    return evaluate(dump, rows, held_back, True, leads), leads


def led_lines(
    name: str,
    dump: list[dict[str, Any]],
    rows: list[Rows],
    everything: Scorer,
    held_back: dict[str, Scorer],
) -> tuple[Lead, dict[str, Lead]]:
    """Print the order led by `everything` and the lead chosen with it, then each
    conversation led by `held_back` (`held_led`); returns that lead and the held-back ones."""
    convs = {q["namespace"] for q in dump}
    every = dict.fromkeys(convs, everything)
    led = best_lead(dump, rows, every)
    print(line(name, evaluate(dump, rows, every, True, dict.fromkeys(convs, led))))
    agg, leads = held_led(dump, rows, held_back)
    print(line(f"held {name}", agg))
    return led, leads


def late_interaction(dump: list[dict[str, Any]], c: float) -> None:
    """The led figures with MaxSim over MiniLM token vectors as one more feature, and what
    computing it for the led pool would cost each request."""
    from tests.evals.late_interaction import TokenVectors, columns, cost_ms

    led = SERVED.led_pool
    vectors = TokenVectors()
    extra = [rows_of(q, col) for q, col in zip(dump, columns(dump, vectors), strict=True)]
    led_lines("led +LI", dump, extra, *fitted(dump, extra, c))
    spent = np.asarray(cost_ms(dump[:100], vectors, led))
    print(
        f"late interaction per request (question + {led} items through MiniLM, first "
        f"100 questions): p50 {np.median(spent):.1f} ms, p95 {np.percentile(spent, 95):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", type=Path)
    parser.add_argument("--c", type=float, default=1.0, help="inverse regularization")
    parser.add_argument(
        "--late-interaction", action="store_true", help="also with MaxSim over token vectors"
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="write the weights fitted on every conversation here (JSON)",
    )
    args = parser.parse_args()
    try:
        dump = load(args.dump)
    except (OSError, DumpMismatch) as exc:
        parser.error(str(exc))
    convs = sorted({q["namespace"] for q in dump})
    rows = [rows_of(q) for q in dump]
    everything, held_back = fitted(dump, rows, args.c)
    print(line("as served", evaluate(dump, rows, dict.fromkeys(convs))))
    print(line("fitted", evaluate(dump, rows, dict.fromkeys(convs, everything))))
    print(line("held-back", evaluate(dump, rows, held_back)))
    print(line("novel", evaluate(dump, rows, dict.fromkeys(convs), novel=True)))
    print(line("held+novel", evaluate(dump, rows, held_back, novel=True)))
    led, leads = led_lines("led", dump, rows, everything, held_back)
    print(
        "held-back leads: "
        + ", ".join(f"{c} {h.items} at {h.log_odds:+.1f}" for c, h in leads.items())
    )
    print("weights (standardized):")
    for name, w in zip(FEATURES, everything.weights, strict=True):
        print(f"  {name:<16} {w:+.3f}")
    print(repr(everything))
    print(repr(led))
    everything.save(args.out, provenance("tests.evals.fit_scorer", args.dump))
    print(f"wrote {args.out}")
    if args.late_interaction:
        late_interaction(dump, args.c)


if __name__ == "__main__":
    main()
