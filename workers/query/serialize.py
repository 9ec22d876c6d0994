"""The evidence context as the answer model reads it (paper App. E.3): two blocks.

Episodic/semantic memories (records) carry `Date:`, the resolved date of what they say;
raw memories (turns and windows of turns) carry `Mentioned:`, the date of the conversation they come from.
Each item's line is also what an evidence budget counts (DESIGN §11.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from schemas import EvidenceItem
from workers.tokens import count_tokens


def _day(value: date | datetime | str | None) -> str:
    """`2 March 2024`, `March 2024` or `2024`: dates as people (and answer models) read them."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        if len(value) == 7:
            return f"{date.fromisoformat(value + '-01'):%B %Y}"
        if len(value) != 10:
            return value
        value = date.fromisoformat(value)
    return f"{value.day} {value:%B %Y}"


def item_line(item: EvidenceItem) -> str:
    if item.kind == "record":
        resolved = _day(item.resolved_date or item.date)
        line = f"- {item.text} (Date: {resolved})" if resolved else f"- {item.text}"
        return line + currency_note(item)
    mentioned = _day(item.date)
    text = item.text.replace("\n", "\n  ")  # a window's turns, one per indented line
    line = f"- [Mentioned: {mentioned}] {text}" if mentioned else f"- {text}"
    return line + currency_note(item)


def currency_note(item: EvidenceItem) -> str:
    """`currency_notes` as the context shows them, each in brackets after the item."""
    return "".join(f" [{n}]" for n in currency_notes(item))


def currency_notes(item: EvidenceItem) -> list[str]:
    """What the item's links say, in words (none for an item without links): whether a
    later statement replaced it and when, whether it replaced an earlier one, and whether
    another statement contradicts it. Only an item nothing replaced is called current: the
    middle of a chain says it was replaced, and that it had replaced an earlier statement."""
    notes = []
    if item.superseded_by:
        when = _day(item.valid_to)
        what = f"its {_listed(item.replaced_values)} " if item.replaced_values else ""
        notes.append(
            f"{what}replaced on {when} by a later statement" if when else f"{what}replaced later"
        )
        if item.replaced_values:
            notes.append(f"{_the_rest(item)} not said to change")
        if item.supersedes:
            notes.append("it had replaced an earlier statement")
    elif item.supersedes:
        since = _day(item.valid_from)
        notes.append(
            f"current since {since}; replaces an earlier statement"
            if since
            else "replaces an earlier statement"
        )
    if item.conflict:
        notes.append("contradicted by another statement; nothing later settles it")
    return notes


def _the_rest(item: EvidenceItem) -> str:
    """What of an item replaced in part still holds: a record's other values, a turn's or
    window's other statements too."""
    return "its other values were" if item.kind == "record" else "the rest of it was"


def _listed(values: Sequence[str]) -> str:
    return " and ".join([", ".join(values[:-1]), values[-1]] if len(values) > 1 else values)


def serialize_context(items: Sequence[EvidenceItem]) -> tuple[str, int]:
    """The two blocks in evidence order, and their o200k token count."""
    memories = [item_line(i) for i in items if i.kind == "record"]
    raw = [item_line(i) for i in items if i.kind != "record"]
    text = "\n".join(
        [
            "Episodic/Semantic Memories:",
            *(memories or ["(none)"]),
            "",
            "Raw Memories:",
            *(raw or ["(none)"]),
        ]
    )
    return text, count_tokens(text)


def items_that_fit(items: Sequence[EvidenceItem], budget_tokens: int) -> int:
    """How many leading items `serialize_context` can write within `budget_tokens`: whole
    items, in order, stopping at the first that would overflow (as the evidence budget
    counts them, DESIGN §11.2), so that an answer reads the best-ranked evidence first."""
    used = serialize_context([])[1]
    sep = count_tokens("\n")
    n = 0
    for item in items:
        used += count_tokens(item_line(item)) + sep
        if used > budget_tokens:
            break
        n += 1
    # the count above is close, not exact (a block's "(none)" goes once it holds an item;
    # an item's line counted alone may differ by a token from its count in place)
    while n < len(items) and serialize_context(items[: n + 1])[1] <= budget_tokens:
        n += 1
    while n and serialize_context(items[:n])[1] > budget_tokens:
        n -= 1
    return n


# a line counted alone is within a few tokens of what it adds in place (a block's "(none)"
# goes with its first item; a line break may join the piece before it)
_NEAR = 8
_RECOUNTS = 16  # items past the leading ones counted in place, per call at most


def within_budget(
    items: Sequence[EvidenceItem], budget_tokens: int
) -> tuple[list[EvidenceItem], str, int]:
    """The `items` whose context fits in `budget_tokens`, in their order, with that context
    and its tokens: a request's `token_budget`. An item that would overflow is left out and
    the next ones are still tried, so a long window ranked first does not leave an agent with
    nothing when shorter items below it fit (the answer reads the leading items that fit
    instead, `items_that_fit`, as recall at a budget counts them, DESIGN §11.2)."""
    # the leading items that fit, exactly as the answer's evidence counts them; then each
    # later item a line's count alone says may fit, counted in place, a few at most (a long
    # context counted again for each of many short items would cost seconds)
    n = items_that_fit(items, budget_tokens)
    kept = list(items[:n])
    context, used = serialize_context(kept)
    recounts = _RECOUNTS
    for item in items[n + 1 :]:
        if not recounts:
            break
        if used + count_tokens(item_line(item)) > budget_tokens + _NEAR:
            continue
        recounts -= 1
        written, after = serialize_context([*kept, item])
        if after <= budget_tokens:
            kept.append(item)
            context, used = written, after
    return kept, context, used
