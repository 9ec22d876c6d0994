"""Whether what an LLM wrote is of its segment.

A small model copies a record of the earlier ones it is shown (`EARLIER_RECORDS`: what the
segment may update) or of the earlier turns it is shown for reference onto a turn that says
something else, or the output format's example
values ("short keyword") into a record's fields. Such a record would cite a turn that does
not say it: the copy gives the earlier record's id new evidence, and a link to it would mark
that turn replaced. A copy is the shown text again, word for word (case and spacing aside):
a restatement the segment makes in its own words, in any language, is kept.
"""

from __future__ import annotations

from collections.abc import Iterable

# the example values of the reply format (`workers.encoder.prompts.SYSTEM_PROMPT`)
PLACEHOLDERS = frozenset(
    {"short keyword", "named entity worth searching for", "one complete standalone sentence"}
)


def as_compared(text: str) -> str:
    """A text as a copy is compared: case and spacing aside."""
    return " ".join(text.casefold().split())


def of_the_segment(text: str, shown: frozenset[str], reference: str, turns: str) -> bool:
    """Not the format's example text, nor an earlier record shown (`shown`) or words of the
    reference context (`reference`) written again where the segment's turns (`turns`) do
    not say them (all as `as_compared` has them): a turn that says the same sentence again
    is a restatement, whatever was stored before it."""
    mine = as_compared(text)
    copied = bool(mine) and (mine in shown or mine in reference) and mine not in turns
    return mine not in PLACEHOLDERS and not copied


def without_placeholders(values: Iterable[str]) -> list[str]:
    """The entities or tags a model wrote, without the format's example values."""
    return [v for v in values if as_compared(v) not in PLACEHOLDERS]
