"""A long turn as passages: bounded, in order, each pointing back into the turn."""

from __future__ import annotations

import time

from workers.text.passages import Passage, from_json, passages, to_json
from workers.tokens import count_tokens


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def test_passages_a_turn_that_fits_is_one_passage_itself() -> None:
    text = "I moved to Lisbon in May."
    assert passages(text, 150, count_tokens) == [Passage(0, len(text))]
    assert to_json(passages(text, 150, count_tokens)) == ""


def test_passages_are_bounded_ordered_and_inside_the_turn() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + words(60) + "." for i in range(8))
    found = passages(text, 150, count_tokens)
    assert len(found) > 1
    assert all(count_tokens(p.shown(text)) <= 150 for p in found)
    starts = [p.start for p in found]
    assert starts == sorted(starts) and all(0 <= p.start < p.end <= len(text) for p in found)
    assert "Paragraph 0." in found[0].shown(text) and "Paragraph 7." in found[-1].shown(text)


def test_passages_heading_is_shown_above_the_passages_under_it() -> None:
    text = "## Deployment\n" + "\n\n".join(words(70, f"step{i}") + "." for i in range(4))
    found = passages(text, 100, count_tokens)
    assert len(found) >= 3
    assert all(p.shown(text).startswith(("## Deployment", "Deployment\n")) for p in found)


def test_passages_code_block_takes_the_sentence_that_introduces_it() -> None:
    intro = words(90, "context") + ". Add this to app.py:"
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(40)) + "\n```"
    text = intro + "\n\n" + code
    found = passages(text, 150, count_tokens)
    with_code = [p for p in found if "```python" in p.shown(text)]
    assert with_code and with_code[0].lead == "Add this to app.py:"
    assert with_code[0].shown(text).startswith("Add this to app.py:\n```python")


def test_passages_oversized_code_is_cut_at_lines_and_a_line_at_characters() -> None:
    code = "```\n" + "\n".join(f"line_{i} = {i} * {i}" for i in range(400)) + "\n```"
    found = passages(code, 120, count_tokens)
    assert len(found) > 5 and all(count_tokens(p.shown(code)) <= 130 for p in found)
    blob = "x" * 50_000  # one line, no spaces: cut by characters
    cut = passages(blob, 120, count_tokens)
    assert len(cut) > 10 and "".join(blob[p.start : p.end] for p in cut) == blob


def test_passages_of_a_huge_message_cost_one_pass() -> None:
    text = ("A sentence of some words here. " * 20 + "\n\n") * 800  # ~350,000 characters
    t0 = time.perf_counter()
    found = passages(text, 150, count_tokens)
    assert time.perf_counter() - t0 < 20  # linear: a quadratic cut takes minutes here
    assert len(found) > 100


def test_passages_round_trip_through_their_stored_form() -> None:
    found = [Passage(0, 10, "Setup", ""), Passage(12, 40, "Setup", "Run:")]
    assert from_json(to_json(found)) == found
    assert from_json("") == [] and from_json(None) == []
