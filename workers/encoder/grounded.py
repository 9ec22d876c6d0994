"""Whether what an LLM wrote is of its segment.

A small model copies a record of the earlier turns it is shown for reference onto a turn that
says something else, or the output format's example values ("short keyword") into a record's
fields. Such a record would cite a turn that does not say it, and a link to it would mark
that turn replaced. A record shares at least one index term (a stemmed word that is no stop
word, `workers.store.fulltext.analyze`) with the turns it was made from; the words of a
paraphrase ("bulleted answers" for "answer in bullet points") share their stems.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from workers.store.fulltext import analyze

# the example values of the reply format (`workers.encoder.prompts.SYSTEM_PROMPT`)
PLACEHOLDERS = frozenset(
    {"short keyword", "named entity worth searching for", "one complete standalone sentence"}
)


def terms(text: str) -> set[str]:
    return set(analyze(text))


def grounded(text: str, turn_terms: set[str]) -> bool:
    """A record's text says something of the turns whose terms are `turn_terms`: it shares
    a term with them, or has none to share (nothing to judge it by)."""
    if text.strip().casefold() in PLACEHOLDERS:
        return False
    mine = terms(text)
    return not mine or bool(mine & turn_terms)


def without_placeholders(values: Iterable[str]) -> list[str]:
    """The entities or tags a model wrote, without the format's example values."""
    return [v for v in values if v.strip().casefold() not in PLACEHOLDERS]


def segment_terms(texts: Sequence[str]) -> set[str]:
    """The terms of a segment's turns, which its records are judged by."""
    return {t for text in texts for t in analyze(text)}
