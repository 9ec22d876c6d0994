"""`python -m tests.evals.fit_adapter --data FILE --out PATH`: fit the query adapter on a split.

Every question with evidence is paired with the turns that answer it; the map `v + v @ A`
of question vectors is fitted by a softmax over the question's conversation's turns (the
answering turns as targets, every other turn of that conversation as a negative), with a
ridge penalty on `A` so it stays near the identity (`workers.query.adapter`). It prints dense
retrieval over raw turns, plain and adapted, with each conversation's adapter fitted on the
others (leave-one-conversation-out), and how far the adapter fitted on every conversation
moves a question (the cosine with its own vector), then writes that adapter to `--out`
with the data, commit and command that produced it; `LYCHEE_QUERY_ADAPTER=PATH` serves it. `--held-back DIR` also writes each conversation's held-back adapter as
DIR/<namespace>.npz, to measure the whole pipeline held back
(`recall_probe --held-back-adapters DIR`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from streams.factories import model_embedder
from streams.settings import Settings
from tests.evals.provenance import provenance
from workers.datasets import load_locomo
from workers.embedding import Embedder
from workers.embedding.model import plain_model_name
from workers.errors import DatasetError
from workers.evaluation.metrics import CATEGORIES, QuestionResult, RankedItem, aggregate
from workers.query.adapter import QueryAdapter

TEMPERATURE = 0.05  # of the softmax over a conversation's turns (cosine similarities)
KS = (10, 30)  # the depths reported


@dataclass
class Split:
    """One conversation: its turns' vectors, its questions' vectors and their targets."""

    namespace: str
    turn_ids: list[str]
    turns: np.ndarray  # (n_turns, dim)
    questions: np.ndarray  # (n_questions, dim)
    gold: list[list[int]]  # the answering turns of each question, as rows of `turns`
    categories: list[str]


def splits_of(data: Path, embedder: Embedder) -> list[Split]:
    out = []
    for conv in load_locomo(data):
        turns = [t for ex in conv.exchanges for t in ex.turns if t.turn_id]
        ids = [str(t.turn_id) for t in turns]
        row = {tid: i for i, tid in enumerate(ids)}
        asked = [
            (qa.question, [row[e] for e in qa.evidence if e in row], CATEGORIES[qa.category])
            for qa in conv.qa
            if qa.category in CATEGORIES
        ]
        asked = [a for a in asked if a[1]]
        if not asked:
            continue  # nothing to fit or measure on
        out.append(
            Split(
                conv.namespace,
                ids,
                np.asarray(embedder.embed([t.rendered() for t in turns]), dtype=np.float32),
                np.asarray(embedder.embed([q for q, _, _ in asked]), dtype=np.float32),
                [g for _, g, _ in asked],
                [c for _, _, c in asked],
            )
        )
    return out


def fit(splits: list[Split], ridge: float, steps: int) -> np.ndarray:
    """`A` minimizing the answering turns' cross-entropy plus `ridge`·‖A‖² (Adam, full batch)."""
    torch.manual_seed(0)
    dim = splits[0].turns.shape[1]
    shift = torch.zeros(dim, dim, requires_grad=True)
    opt = torch.optim.Adam([shift], lr=1e-3)
    batches = []
    for s in splits:
        target = torch.zeros(len(s.gold), len(s.turns))
        for i, rows in enumerate(s.gold):
            target[i, rows] = 1.0 / len(rows)
        batches.append((torch.from_numpy(s.turns), torch.from_numpy(s.questions), target))
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.zeros(())
        for turns, questions, target in batches:
            q = questions + questions @ shift
            q = q / q.norm(dim=1, keepdim=True)
            logp = torch.log_softmax(q @ turns.T / TEMPERATURE, dim=1)
            loss = loss - (target * logp).sum() / len(questions)
        loss = loss / len(batches) + ridge * (shift**2).sum()
        loss.backward()
        opt.step()
    return shift.detach().numpy().astype(np.float32)


def ranked(s: Split, adapter: QueryAdapter | None, depth: int = max(KS)) -> list[QuestionResult]:
    """Each question with its conversation's `depth` nearest turns, for the project's metrics."""
    q = s.questions if adapter is None else adapter.apply(s.questions)
    top = np.argsort(-(q @ s.turns.T), axis=1)[:, :depth]
    ids = s.turn_ids
    return [
        QuestionResult(
            c, frozenset(ids[i] for i in g), [RankedItem(ids[t], (ids[t],)) for t in row], 0.0
        )
        for c, g, row in zip(s.categories, s.gold, top, strict=True)
    ]


def report(name: str, splits: list[Split], adapters: dict[str, QueryAdapter | None]) -> None:
    results = [r for s in splits for r in ranked(s, adapters[s.namespace])]
    recall = aggregate(results, KS, ())["recall_at_k"]
    for k in map(str, KS):
        cats = " ".join(f"{c} {r[k]:.3f}" for c, r in recall.items() if c != "all")
        print(f"{name:<10} raw turns R@{k} {recall['all'][k]:.3f} | {cats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--ridge", type=float, default=0.1, help="penalty on the shift A")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, required=True, help="write the adapter here (.npz)")
    parser.add_argument("--held-back", type=Path, help="also write each held-back adapter here")
    args = parser.parse_args()
    embedder = model_embedder(Settings())
    model = plain_model_name(embedder.model_name)
    try:
        splits = splits_of(args.data, embedder)
    except (OSError, DatasetError) as exc:
        parser.error(str(exc))
    if len(splits) < 2:
        parser.error(
            f"{args.data}: fitting holds one conversation back, so it needs two with questions"
        )
    names = [s.namespace for s in splits]
    report("plain", splits, dict.fromkeys(names))
    held = {
        s.namespace: QueryAdapter(
            model, fit([o for o in splits if o is not s], args.ridge, args.steps)
        )
        for s in splits
    }
    report("held back", splits, dict(held))
    everything = QueryAdapter(model, fit(splits, args.ridge, args.steps))
    report("fitted", splits, dict.fromkeys(names, everything))
    questions = np.vstack([s.questions for s in splits])
    kept = (everything.apply(questions) * questions).sum(axis=1)
    print(
        f"a question's cosine with its own vector, moved: median {np.median(kept):.3f}, "
        f"5th percentile {np.percentile(kept, 5):.3f}"
    )
    made = provenance("tests.evals.fit_adapter", args.data)
    everything.save(args.out, made)
    print(f"wrote {args.out} ({model}, ridge {args.ridge}, {args.steps} steps)")
    if args.held_back:
        args.held_back.mkdir(parents=True, exist_ok=True)
        for name, adapter in held.items():
            adapter.save(args.held_back / f"{name}.npz", {**made, "held_back": name})


if __name__ == "__main__":
    main()
