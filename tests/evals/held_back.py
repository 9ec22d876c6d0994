"""`python -m tests.evals.held_back DUMP...`: a constant chosen with each conversation held back.

Each dump holds the same questions answered under one setting of a constant (`recall_probe
--dump`, one run per setting). For each conversation the setting with the highest R@10 +
R@1000 tokens over the other conversations is chosen, and that conversation is scored with
it: the figure a setting chosen on data earns on a conversation it was not chosen on. With
`--no-category-lower` a fold chooses only among settings whose every category at 1,000
tokens is at least the first dump's on its conversations (the first dump is the code
before the change). It prints each dump's own figures, each fold's choice, and the
held-back figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from pydantic import ValidationError

from tests.evals.compare import DumpMismatch, load, paired
from workers.evaluation.metrics import CATEGORY_ORDER, recall_at_budget, recall_at_k


@dataclass(frozen=True)
class Scored:
    """One question under one setting."""

    namespace: str
    category: str
    r10: float
    r1000: float


def scored(first: Path, dumps: Sequence[Path]) -> dict[str, list[Scored]]:
    """Each dump's questions with gold turns, checked to be the first dump's questions."""
    base = load(first)
    return {
        str(path): [
            Scored(
                p.namespace,
                p.category,
                recall_at_k(p.after, p.gold, 10),
                recall_at_budget(p.after, p.gold, 1000),
            )
            for p in paired(base, base if path == first else load(path))
        ]
        for path in dumps
    }


def figures(rows: Sequence[Scored]) -> dict[str, float]:
    """R@10 and R@1000 tokens over `rows`, then R@1000 tokens per category."""
    out = {"R@10": mean(r.r10 for r in rows), "R@1000 tok": mean(r.r1000 for r in rows)}
    for cat in CATEGORY_ORDER[1:]:
        if of := [r.r1000 for r in rows if r.category == cat]:
            out[cat] = mean(of)
    return out


def choose(settings: Mapping[str, Sequence[Scored]], no_category_lower: bool) -> dict[str, str]:
    """Each conversation's setting, chosen on the other conversations' questions (ties: the
    earlier dump)."""
    names = list(settings)
    conversations = sorted({r.namespace for r in settings[names[0]]})
    if len(conversations) < 2:
        held = ", ".join(conversations) or "none"
        raise ValueError(f"one conversation ({held}): nothing to hold it back from")
    choice = {}
    for ns in conversations:
        rest = {n: figures([r for r in settings[n] if r.namespace != ns]) for n in names}
        base = rest[names[0]]
        allowed = [
            n
            for n in names
            if not no_category_lower
            or all(rest[n].get(c, 0.0) >= v - 1e-9 for c, v in base.items() if c in CATEGORY_ORDER)
        ]
        gain = {n: rest[n]["R@10"] + rest[n]["R@1000 tok"] for n in allowed}
        choice[ns] = max(allowed, key=lambda n: (gain[n], -names.index(n)))
    return choice


def _line(name: str, f: Mapping[str, float]) -> str:
    return f"{name:<40} " + "  ".join(f"{k} {v:.3f}" for k, v in f.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", type=Path, nargs="+", help="one recall dump per setting")
    parser.add_argument("--no-category-lower", action="store_true")
    args = parser.parse_args()
    if len(args.dumps) < 2:
        parser.error("give at least two dumps: the settings to choose from")
    try:
        settings = scored(args.dumps[0], args.dumps)
    except (DumpMismatch, ValidationError, OSError) as exc:
        parser.error(f"cannot read the dumps as answers to the same questions: {exc}")
    try:
        choice = choose(settings, args.no_category_lower)
    except ValueError as exc:
        parser.error(f"the dumps hold questions with gold turns of {exc}")
    for name, rows in settings.items():
        print(_line(name, figures(rows)))
    held: list[Scored] = []
    for ns, name in choice.items():
        print(f"{ns} held back: chosen on the others {name}")
        held += [r for r in settings[name] if r.namespace == ns]
    print(_line("held back", figures(held)))


if __name__ == "__main__":
    main()
