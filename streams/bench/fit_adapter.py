"""`python -m streams.bench.fit_adapter --data FILE`: fit the query adapter on a LoCoMo split.

Every question with evidence is paired with the turns that answer it; the map `v + v @ A`
of question vectors is fitted by a softmax over the question's conversation's turns (the
answering turns as targets, every other turn of that conversation as a negative), with a
ridge penalty on `A` so it stays near the identity (`workers.query.adapter`). It prints dense
retrieval over raw turns, plain and adapted, with each conversation's adapter fitted on the
others (leave-one-conversation-out), then writes the adapter fitted on every conversation
(`--out`, default the served `workers/query/adapter.npz`). `--held-back DIR` also writes each
conversation's held-back adapter as DIR/<namespace>.npz, to measure the whole pipeline held
back (`recall_probe --held-back-adapters DIR`).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from streams.factories import model_embedder
from streams.settings import Settings
from workers.datasets import load_locomo
from workers.evaluation.metrics import CATEGORIES
from workers.query.adapter import FITTED_PATH, QueryAdapter

TEMPERATURE = 0.05  # of the softmax over a conversation's turns (cosine similarities)


@dataclass
class Split:
    """One conversation: its turns' vectors, its questions' vectors and their targets."""

    namespace: str
    turns: np.ndarray  # (n_turns, dim)
    questions: np.ndarray  # (n_questions, dim)
    gold: list[list[int]]  # the answering turns of each question, as rows of `turns`
    categories: list[str]


def splits_of(data: Path, settings: Settings) -> list[Split]:
    embedder = model_embedder(settings)
    out = []
    for conv in load_locomo(data):
        turns = [t for ex in conv.exchanges for t in ex.turns if t.turn_id]
        row = {t.turn_id: i for i, t in enumerate(turns)}
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


def recall(s: Split, adapter: QueryAdapter | None, k: int) -> list[float]:
    """Each question's share of answering turns among the `k` nearest turns."""
    q = s.questions if adapter is None else adapter.apply(s.questions)
    top = np.argsort(-(q @ s.turns.T), axis=1)[:, :k]
    return [len(set(g) & set(t.tolist())) / len(g) for g, t in zip(s.gold, top, strict=True)]


def report(name: str, splits: list[Split], adapters: dict[str, QueryAdapter | None]) -> None:
    for k in (10, 30):
        by: dict[str, list[float]] = defaultdict(list)
        for s in splits:
            for c, r in zip(s.categories, recall(s, adapters[s.namespace], k), strict=True):
                by[c].append(r)
                by["all"].append(r)
        cats = " ".join(f"{c} {np.mean(v):.3f}" for c, v in sorted(by.items()) if c != "all")
        print(f"{name:<10} raw turns R@{k} {np.mean(by['all']):.3f} | {cats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--ridge", type=float, default=0.1, help="penalty on the shift A")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=FITTED_PATH)
    parser.add_argument("--held-back", type=Path, help="also write each held-back adapter here")
    args = parser.parse_args()
    settings = Settings()
    model = model_embedder(settings).model_name.removeprefix("int8:")
    splits = splits_of(args.data, settings)
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
    everything.save(args.out)
    print(f"wrote {args.out} ({model}, ridge {args.ridge}, {args.steps} steps)")
    if args.held_back:
        args.held_back.mkdir(parents=True, exist_ok=True)
        for name, adapter in held.items():
            adapter.save(args.held_back / f"{name}.npz")


if __name__ == "__main__":
    main()
