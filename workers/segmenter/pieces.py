"""An oversized turn's text in pieces under the segmenter's cap, each encoded in a segment of
its own: prose at its sentences (a sentence too long, at word runs), fenced code at its lines,
and each piece of code fenced again, so what reads a piece (the extractive encoder, an LLM)
still knows it is code. Cut at sentences, a log pasted in a code block became runs of log
lines with its fences and line breaks gone, which read as prose: sentence records of log
lines."""

from __future__ import annotations

import re
from collections.abc import Callable

TokenCounter = Callable[[str], int]

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
# a fence line: three or more backticks or tildes, an info string after them (CommonMark: a
# backtick fence's info string holds no backtick, else the line is prose)
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)


def split_text(content: str, budget: int, count: TokenCounter) -> list[str]:
    """`content` in pieces of at most `budget` tokens (as `count` counts them)."""
    found = blocks(content)
    if not any(fence for fence, _ in found):  # prose alone (or blank code), as it is
        return _merge_runs(_prose(content, budget, count), budget, count)
    pieces: list[str] = []
    for fence, text in found:
        if fence is None:  # the blank lines around a code block are no part of it
            pieces += _merge_runs(_prose(text.strip(), budget, count), budget, count)
        else:
            pieces += _code(fence, text, budget, count)
    return pieces


def blocks(content: str) -> list[tuple[str | None, str]]:
    """The text as prose (None, text) and fenced code (its opening fence line, its lines), in
    order; a fence left open runs to the end."""
    out: list[tuple[str | None, str]] = []
    opening: str | None = None
    marker = ""
    at = 0
    for m in _FENCE_RE.finditer(content):
        mark, info = m.group(1), m.group(2)
        if opening is None:
            if mark[0] == "`" and "`" in info:
                continue  # prose that starts with backticks
            out.append((None, content[at : m.start()]))
            opening, marker, at = m.group(0).strip(), mark, m.end() + 1
        elif mark[0] == marker[0] and len(mark) >= len(marker) and not info.strip():
            out.append((opening, content[at : m.start()].rstrip("\n")))
            opening, at = None, m.end() + 1
    out.append((opening, content[at:].rstrip("\n") if opening else content[at:]))
    return [(fence, text) for fence, text in out if text.strip()]


def _prose(text: str, budget: int, count: TokenCounter) -> list[str]:
    """Sentences, and a sentence longer than the cap as word runs."""
    pieces: list[str] = []
    for sentence in _SENTENCE_RE.split(text):
        if count(sentence) <= budget:
            pieces.append(sentence)
        else:
            pieces += _runs(sentence.split(), " ", budget, count)
    return pieces


def _code(fence: str, body: str, budget: int, count: TokenCounter) -> list[str]:
    """Runs of whole lines, each fenced as the block was (a line longer than the cap alone,
    at its words)."""
    close = fence.lstrip(" \t")[:3]
    if count(f"{fence}\n\n{close}") > budget // 4:  # a long info string: the bare marker
        fence = close
    room = max(1, budget - count(f"{fence}\n\n{close}"))
    lines: list[str] = []
    for line in body.split("\n"):
        lines += [line] if count(line) <= room else _runs(line.split(), " ", room, count)
    return [f"{fence}\n{run}\n{close}" for run in _runs(lines, "\n", room, count)]


def _runs(parts: list[str], joint: str, budget: int, count: TokenCounter) -> list[str]:
    """`parts` joined by `joint` into runs of at most `budget` tokens, counted as they grow
    (o200k splits before a space and a line break, so a run's count is its parts' sum)."""
    out: list[str] = []
    run: list[str] = []
    used = 0
    for part in parts:
        cost = count(f"{joint}{part}" if run else part)
        if run and used + cost > budget:
            out.append(joint.join(run))
            run, used, cost = [], 0, count(part)
        run.append(part)
        used += cost
    if run:
        out.append(joint.join(run))
    return out


def _merge_runs(pieces: list[str], budget: int, count: TokenCounter) -> list[str]:
    merged: list[str] = []
    for piece in pieces:
        if merged and count(merged[-1] + " " + piece) <= budget:
            merged[-1] = merged[-1] + " " + piece
        else:
            merged.append(piece)
    return merged
