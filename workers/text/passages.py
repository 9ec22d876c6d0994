"""A long turn as passages: the pieces of it that evidence can show within a prompt's budget.

An assistant's reply of a thousand tokens answers a question with one paragraph, one list
item or one code block; shown whole, it fills the context an agent gives its memory. A turn
longer than `max_tokens` is cut at its markdown blocks (`workers.text.markdown`) into passages of
at most that many tokens, in order, each with its character span in the turn: consecutive
blocks share a passage while they fit, a heading starts a new one and is shown above the
passages under it (a passage alone only at the end), a code block or a table starts a new one and
takes the sentence that introduces it ("Add this to app.py:"), and a block larger than a
passage is cut: code where its blank lines part it (a comment stays with the lines it
explains), then at lines, its fences kept by its first and last pieces; a table at its rows,
each later piece shown under the table's header; prose at its sentences. A turn that fits is
one passage: itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import NamedTuple

from workers.text.markdown import FENCE, Block, Kind, blocks, heading_text, is_rule

Count = Callable[[str], int]
# A few sentences (about fifty words), a list item or a short code block. Chosen from 150,
# 100 and 70 with each BEAM dev conversation held back (70 in every fold); 50 scores higher
# still, by one sentence a passage, too little to read a reply by.
PASSAGE_TOKENS = 70
SEPARATOR = 1  # the line break between two joined pieces, as the tokenizer counts it
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class Passage(NamedTuple):  # a tuple: cheap to build for each passage a request reads back
    start: int
    end: int  # content[start:end] is what the passage shows of the turn
    heading: str = ""  # the heading the passage sits under, shown above it
    lead: str = ""  # the sentence that introduces its code block or table

    def shown(self, content: str) -> str:
        """What evidence shows: the heading, the lead-in, then the passage."""
        parts = [self.heading, self.lead, content[self.start : self.end]]
        return "\n".join(p for p in parts if p)


def passages(content: str, max_tokens: int, count: Count) -> list[Passage]:
    """`content` as passages of at most `max_tokens` (see the module); one when it fits.

    Sizes are the sums of the blocks' (lines', sentences') own counts, so a message of any
    length costs a pass or two of the tokenizer (a code part too large is counted again by
    its lines)."""
    if count(content) <= max_tokens:
        return [Passage(0, len(content))]
    out: list[Passage] = []
    group: list[Block] = []
    size, heading, shown_heading, lead = 0, "", "", ""
    previous: Block | None = None

    def close(last: bool = False) -> None:
        # headings alone are shown above the passages under them; at the end, they are all
        if group and (last or any(b.kind is not Kind.heading for b in group)):
            out.append(Passage(group[0].start, group[-1].end, shown_heading, lead))
        group.clear()

    for block in blocks(content):
        text = block.text(content)
        n = count(text)
        if block.kind is Kind.heading and size >= max_tokens // 2:
            close()  # a section of its own when the passage before has enough to say
        if group and size + n + SEPARATOR <= max_tokens:
            group.append(block)
            size += n + SEPARATOR
        else:
            close()
            starts_code = block.kind in (Kind.code, Kind.table)
            lead = _lead(content, previous) if starts_code else ""
            shown_heading = "" if block.kind is Kind.heading else heading
            budget = max(max_tokens - count(lead), 1)
            if n <= budget:
                group.append(block)
                size = n + count(lead)
            elif block.kind is Kind.code:
                out += _code(content, block, shown_heading, lead, budget, count)
                size, lead = 0, ""
            elif block.kind is Kind.table:
                out += _table(content, block, shown_heading, lead, budget, count)
                size, lead = 0, ""
            else:
                out += _pack(
                    content, _sentences(content, block), shown_heading, lead, budget, count
                )
                size, lead = 0, ""
        if block.kind is Kind.heading:
            heading = heading_text(text)[:MAX_HEADING_CHARS]
        previous = block
    close(last=True)
    return out


MAX_HEADING_CHARS = 200


def _lead(content: str, previous: Block | None) -> str:
    """The last sentence of the prose just before a code block or table, when it introduces
    it (ends with a colon)."""
    if previous is None or previous.kind not in (Kind.prose, Kind.item):
        return ""
    text = previous.text(content).rstrip()
    if not text.endswith(":"):
        return ""
    return _SENTENCE.split(text)[-1].strip()[:MAX_HEADING_CHARS]


def _code(
    content: str, block: Block, heading: str, lead: str, max_tokens: int, count: Count
) -> list[Passage]:
    """A code block too large for a passage, cut where its blank lines part it and, a part
    still too large, at its lines; its opening fence shown by the first piece and its
    closing one by the last, their tokens kept aside for them."""
    lines = _lines(content, block)
    opening = lines.pop(0) if lines and _is_fence(content, lines[0]) else None
    closing = lines.pop() if lines and _is_fence(content, lines[-1]) else None
    fences = [f for f in (opening, closing) if f is not None]
    room = max_tokens - sum(count(content[s:e]) + SEPARATOR for s, e in fences)
    if room < max_tokens // 2:  # fences too long to keep (a long info string): cut as lines
        opening = closing = None
        lines, room = _lines(content, block), max_tokens
    spans: list[tuple[int, int]] = []
    for part in _parts(lines, content):
        if count(content[part[0][0] : part[-1][1]]) <= room:
            spans.append((part[0][0], part[-1][1]))
        else:
            spans += part
    found = _pack(content, spans, heading, lead, room, count) if spans else []
    if not found:
        return [Passage(block.start, block.end, heading, lead)]
    if opening is not None:
        found[0] = found[0]._replace(start=opening[0])
    if closing is not None:
        found[-1] = found[-1]._replace(end=closing[1])
    return found


def _is_fence(content: str, span: tuple[int, int]) -> bool:
    return bool(FENCE.match(content[span[0] : span[1]]))


def _parts(lines: list[tuple[int, int]], content: str) -> list[list[tuple[int, int]]]:
    """Runs of non-blank lines: the parts a blank line separates."""
    parts: list[list[tuple[int, int]]] = [[]]
    for s, e in lines:
        if content[s:e].strip():
            parts[-1].append((s, e))
        elif parts[-1]:
            parts.append([])
    return [p for p in parts if p]


def _table(
    content: str, block: Block, heading: str, lead: str, max_tokens: int, count: Count
) -> list[Passage]:
    """A table too large for a passage, cut at its rows; a piece after the first is shown
    under the table's header row and its rule, which say what its columns are."""
    rows = _lines(content, block)
    header = rows[:2] if len(rows) > 2 and is_rule(content[rows[1][0] : rows[1][1]]) else []
    shown_header = content[header[0][0] : header[-1][1]] if header else ""
    room = max_tokens - count(shown_header) - SEPARATOR
    if not header or room < max_tokens // 2:  # no header, or one too large to repeat
        return _pack(content, rows, heading, lead, max_tokens, count)
    under = "\n".join(p for p in (lead, shown_header) if p)
    first, *rest = _pack(content, rows[2:], heading, lead, room, count)
    return [first._replace(start=block.start), *(p._replace(lead=under) for p in rest)]


def _sentences(content: str, block: Block) -> list[tuple[int, int]]:
    text = block.text(content)
    spans, at = [], 0
    for m in _SENTENCE.finditer(text):
        spans.append((block.start + at, block.start + m.start()))
        at = m.end()
    spans.append((block.start + at, block.end))
    return spans


def _lines(content: str, block: Block) -> list[tuple[int, int]]:
    spans, at = [], block.start
    for line in block.text(content).split("\n"):
        spans.append((at, at + len(line)))
        at += len(line) + 1
    return spans


def _pack(
    content: str,
    spans: list[tuple[int, int]],
    heading: str,
    lead: str,
    max_tokens: int,
    count: Count,
) -> list[Passage]:
    """Consecutive spans joined while their counts fit; a span too large alone is cut into
    pieces of about `max_tokens` by characters (a line of minified code, a run of symbols)."""
    out: list[Passage] = []
    start, end, size = spans[0][0], spans[0][0], 0
    for s, e in spans:
        n = count(content[s:e])
        if end > start and size + SEPARATOR + n > max_tokens:
            out.append(Passage(start, end, heading, lead))
            start, size = s, 0
        if n > max_tokens:
            step = max(1, (e - s) * max_tokens // n)
            for a in range(s, e, step):
                out.append(Passage(a, min(a + step, e), heading, lead))
            start, end, size = e, e, 0
            continue
        end, size = e, size + n + (SEPARATOR if size else 0)
    if end > start:
        out.append(Passage(start, end, heading, lead))
    return out


def to_json(found: list[Passage]) -> str:
    """How a turn's passages are stored: empty for a turn that is one passage."""
    if len(found) <= 1:
        return ""
    return json.dumps([[p.start, p.end, p.heading, p.lead] for p in found])


def from_json(stored: str | None) -> list[Passage]:
    """The passages `to_json` stored; none for a turn that is one passage (or an older row)."""
    if not stored:
        return []
    return [Passage(int(a), int(b), str(h), str(lead)) for a, b, h, lead in json.loads(stored)]
