"""An oversized turn's text in pieces: prose at sentences, fenced code at lines, each piece
of code fenced again."""

from __future__ import annotations

from workers.segmenter.pieces import blocks, split_text
from workers.tokens import count_tokens

LOG = "\n".join(f"2025-02-20 10:{i // 60:02d}:{i % 60:02d} INFO worker {i} ok" for i in range(400))


def test_a_log_in_a_code_block_is_cut_at_its_lines_and_each_piece_is_fenced() -> None:
    text = f"Here is the log of last night's run.\n\n```text\n{LOG}\n```\n\nWhat went wrong?"
    pieces = split_text(text, 500, count_tokens)
    assert all(count_tokens(p) <= 500 for p in pieces)
    assert pieces[0] == "Here is the log of last night's run." and pieces[-1] == "What went wrong?"
    code = pieces[1:-1]
    assert len(code) > 2
    assert all(p.startswith("```text\n") and p.endswith("\n```") for p in code)
    # every line once, whole, in order
    assert [ln for p in code for ln in p.split("\n")[1:-1]] == LOG.split("\n")


def test_a_fence_left_open_runs_to_the_end_and_a_tilde_fence_closes_with_tildes() -> None:
    assert blocks("Run it:\n```bash\nmake test\nmake lint") == [
        (None, "Run it:\n"),
        ("```bash", "make test\nmake lint"),
    ]
    assert blocks("~~~\na\n```\nb\n~~~\nafter") == [("~~~", "a\n```\nb"), (None, "after")]


def test_prose_without_code_is_cut_as_before_at_sentences_then_word_runs() -> None:
    long = " ".join(["word"] * 300)
    pieces = split_text(f"First one. Second one. {long}.", 100, count_tokens)
    assert pieces[0] == "First one. Second one."
    assert all(count_tokens(p) <= 100 for p in pieces)
    assert " ".join(pieces[1:]) == f"{long}."


def test_a_blank_code_block_is_cut_as_text_and_never_to_nothing() -> None:
    """Nothing but a fence of blank lines: no piece would leave the segmenter no turn."""
    assert split_text("```\n" + " \n" * 3000 + "```", 800, count_tokens)


def test_a_fence_closes_only_with_as_many_of_its_own_marks() -> None:
    text = "````md\n```py\nprint(1)\n```\nmore\n````\nafter"
    assert blocks(text) == [("````md", "```py\nprint(1)\n```\nmore"), (None, "after")]


def test_a_long_info_string_is_not_repeated_over_the_cap() -> None:
    text = "```text " + " ".join(["word"] * 950) + "\n" + LOG + "\n```"
    pieces = split_text(text, 880, count_tokens)
    assert all(count_tokens(p) <= 880 for p in pieces)
    assert all(p.startswith("```\n") for p in pieces)
