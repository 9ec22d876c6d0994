"""The blocks of a message as an assistant writes it: headings, lists, tables, code, prose.

Agents' replies are markdown: a heading names what the lines under it are about, a list item
is one point, a table or a code block is one thing that must not be cut into sentences. Both
the passages a long turn is indexed as (`workers.text.passages`) and the sentences the
offline encoder reads (`workers.encoder.extractive`) start from these blocks. Every block
keeps its character span in the message, so what is shown can point back into the turn.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class Kind(enum.Enum):
    heading = "heading"
    code = "code"
    table = "table"
    item = "item"  # one list item with its continuation lines
    prose = "prose"  # a paragraph


@dataclass(frozen=True)
class Block:
    kind: Kind
    start: int
    end: int  # text[start:end] is the block, without its surrounding blank lines

    def text(self, message: str) -> str:
        return message[self.start : self.end]


FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_RULE_CELL = re.compile(r":?-{2,}:?")
_HEADING = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]+\S|\*\*[^*\n]{1,120}\*\*:?[ \t]*$)")
_ITEM = re.compile(r"^[ \t]{0,3}(?:[-*+]|\d{1,3}[.)])[ \t]+\S")
_TABLE = re.compile(r"^[ \t]*\|")
_LINE = re.compile(r"[^\n]*(?:\n|$)")


def blocks(message: str) -> list[Block]:
    """The message's blocks in order; blank lines separate prose and end list items."""
    out: list[Block] = []
    lines = [(m.start(), m.group()) for m in _LINE.finditer(message) if m.group()]
    i = 0
    while i < len(lines):
        start, line = lines[i]
        if not line.strip():
            i += 1
            continue
        kind, j = _block_at(lines, i)
        end = lines[j - 1][0] + len(lines[j - 1][1].rstrip())
        out.append(Block(kind, start + len(line) - len(line.lstrip()), end))
        i = j
    return out


def _block_at(lines: list[tuple[int, str]], i: int) -> tuple[Kind, int]:
    """The kind of the block that starts at line `i`, and the line after it."""
    line = lines[i][1]
    if fence := FENCE.match(line):
        marker = fence.group(1)
        j = i + 1
        while j < len(lines) and not lines[j][1].lstrip().startswith(marker):
            j += 1
        return Kind.code, min(j + 1, len(lines))  # an unclosed fence runs to the end
    if _HEADING.match(line):
        return Kind.heading, i + 1
    if _TABLE.match(line):
        return Kind.table, _while(lines, i + 1, lambda s: bool(_TABLE.match(s)))
    if _ITEM.match(line):
        # its continuation: indented or plain lines up to a blank line or the next item
        return Kind.item, _while(lines, i + 1, _continues)
    return Kind.prose, _while(lines, i + 1, lambda s: _continues(s) and not _ITEM.match(s))


def _continues(line: str) -> bool:
    return bool(line.strip()) and not (
        FENCE.match(line) or _HEADING.match(line) or _TABLE.match(line) or _ITEM.match(line)
    )


def _while(lines: list[tuple[int, str]], j: int, keep: Callable[[str], bool]) -> int:
    while j < len(lines) and keep(lines[j][1]):
        j += 1
    return j


def is_rule(line: str) -> bool:
    """Whether `line` is the rule under a table's header row (`|---|:--:|`): cells of dashes
    with an optional colon either side (read cell by cell, no backtracking over blanks)."""
    cells = line.strip().strip("|").split("|")
    return all(_RULE_CELL.fullmatch(c.strip()) for c in cells)


def heading_text(block: str) -> str:
    """A heading's words without its markup: "## Step 1: Setup" -> "Step 1: Setup"."""
    return block.strip().lstrip("#").strip().strip("*").rstrip(":").strip("*").strip()


def prose_spans(message: str) -> Iterator[tuple[int, int]]:
    """The spans of the message's prose and list items: what holds sentences (code, tables
    and headings do not)."""
    for b in blocks(message):
        if b.kind in (Kind.prose, Kind.item):
            yield b.start, b.end
