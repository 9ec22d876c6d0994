"""Questions that name two statements: does a ranking show both, and the newer one first?

A data file can name, per question, the turns behind two statements (`QA.sources`): the
message that held a value and the one that changed it (`original_info`, `updated_info`), or
two statements that cannot both hold (`first_statement`, `second_statement`). A memory
that tells today's truth shows the newer value above the older one; faced with a
contradiction, it shows both. An item covers a turn when the turn id is in its provenance;
a statement that spans several turns is covered at the first item covering any of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from workers.evaluation.metrics import QuestionResult, RankedItem

TOP_K = 10


@dataclass(frozen=True)
class PairCheck:
    """A check over the two statements a question names under `first` and `second`."""

    name: str
    first: str
    second: str
    newer_first: bool  # True: `second` is the newer value and must rank above `first`


UPDATES = PairCheck("newer_first", "original_info", "updated_info", newer_first=True)
CONFLICTS = PairCheck("both_covered", "first_statement", "second_statement", newer_first=False)
CHECKS: tuple[PairCheck, ...] = (UPDATES, CONFLICTS)


def first_covered(items: Sequence[RankedItem], turns: Collection[str]) -> int | None:
    """The 0-based rank of the first item covering any of `turns`; None when none does."""
    wanted = set(turns)
    for rank, item in enumerate(items):
        if wanted.intersection(item.turn_ids):
            return rank
    return None


def newer_first(
    items: Sequence[RankedItem], older: Collection[str], newer: Collection[str], k: int = TOP_K
) -> bool:
    """The newer statement is covered within the first k items, above the older one.

    The older one is what only it holds: a turn named on both sides holds the newer value
    too, so it cannot stand for the older above the newer. When the older is not covered
    within the first k items (or holds no turn of its own), the newer is above it.
    """
    at_newer = first_covered(items[: max(k, 0)], newer)
    if at_newer is None:
        return False
    only_older = set(older) - set(newer)
    at_older = first_covered(items[: max(k, 0)], only_older) if only_older else None
    return at_older is None or at_newer < at_older


def both_covered(
    items: Sequence[RankedItem], first: Collection[str], second: Collection[str], k: int = TOP_K
) -> bool:
    """Both statements are covered within the first k items."""
    top = items[: max(k, 0)]
    return first_covered(top, first) is not None and first_covered(top, second) is not None


def passes(
    check: PairCheck,
    items: Sequence[RankedItem],
    sources: Mapping[str, Sequence[str]],
    k: int = TOP_K,
) -> bool:
    """Whether `items` pass `check` for a question naming its statements in `sources`."""
    first, second = sources[check.first], sources[check.second]
    if check.newer_first:
        return newer_first(items, first, second, k)
    return both_covered(items, first, second, k)


def names_pair(check: PairCheck, sources: Mapping[str, Sequence[str]]) -> bool:
    """The question names turns for both of the check's statements."""
    return bool(sources.get(check.first)) and bool(sources.get(check.second))


def pair_counts(results: Sequence[QuestionResult], k: int = TOP_K) -> dict[str, dict[str, int]]:
    """Per check, `n` questions passing it of the `of` that name both its statements, and
    the cut-off `k`; a check no question names is left out."""
    out: dict[str, dict[str, int]] = {}
    for check in CHECKS:
        named = [r for r in results if names_pair(check, r.sources)]
        if named:
            n = sum(passes(check, r.items, r.sources, k) for r in named)
            out[check.name] = {"n": n, "of": len(named), "k": k}
    return out
