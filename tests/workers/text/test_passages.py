"""A long turn as passages: bounded, in order, each pointing back into the turn."""

from __future__ import annotations

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


def test_passages_code_is_cut_where_blank_lines_part_it_with_its_fences_kept() -> None:
    parts = [
        f"# step {i}: explain what the next command does\nrun_step --number {i} --verbose"
        for i in range(12)
    ]
    code = "```bash\n" + "\n\n".join(parts) + "\n```"
    found = passages(code, 60, count_tokens)
    shown = [p.shown(code) for p in found]
    assert len(found) > 2 and all(count_tokens(s) <= 60 for s in shown)
    # each comment stays with the command it explains; no piece is a fence alone
    for i in range(12):
        assert any(f"# step {i}:" in s and f"--number {i} " in s for s in shown)
    assert shown[0].startswith("```bash\n# step 0") and shown[-1].endswith("--verbose\n```")
    assert all(s.strip("`\n ") for s in shown)


def test_passages_a_table_piece_is_shown_under_the_header_row() -> None:
    rows = [f"| option {i} | what it does in a few words | default {i} |" for i in range(30)]
    table = "| option | meaning | default |\n|---|:---:|---|\n" + "\n".join(rows)
    found = passages(table, 80, count_tokens)
    assert len(found) > 2
    for p in found:
        shown = p.shown(table)
        assert shown.count("| option | meaning | default |\n|---|:---:|---|") == 1
        assert "| option 0 |" in shown or p.start > 0  # the first piece holds the header
        assert count_tokens(shown) <= 80
    assert all(any(f"| option {i} |" in p.shown(table) for p in found) for i in range(30))


def test_passages_a_heading_is_never_a_passage_alone() -> None:
    text = words(60, "intro") + ".\n\n## Which method?\n\n```\n" + "x = 1\n" * 40 + "```"
    found = passages(text, 70, count_tokens)
    assert all(p.shown(text).strip() != "## Which method?" for p in found)
    assert all(p.heading == "Which method?" for p in found if "x = 1" in p.shown(text))


def test_passages_of_a_huge_message_count_each_piece_once() -> None:
    text = ("A sentence of some words here. " * 20 + "\n\n") * 800  # ~350,000 characters
    counted: list[int] = []

    def count(piece: str) -> int:
        counted.append(len(piece))
        return count_tokens(piece)

    found = passages(text, 150, count)
    assert len(found) > 100
    assert sum(counted) < 3 * len(text)  # linear: a quadratic cut counts it thousands of times


def test_passages_round_trip_through_their_stored_form() -> None:
    found = [Passage(0, 10, "Setup", ""), Passage(12, 40, "Setup", "Run:")]
    assert from_json(to_json(found)) == found
    assert from_json("") == [] and from_json(None) == []


def test_passages_a_header_too_large_to_repeat_is_not_repeated() -> None:
    header = "| " + " | ".join(f"column {i} of the report" for i in range(12)) + " |"
    rule = "|" + "---|" * 12
    rows = [f"| row {i} | " + " | ".join("x" for _ in range(11)) + " |" for i in range(30)]
    table = "\n".join([header, rule, *rows])
    found = passages(table, 70, count_tokens)
    assert sum(p.shown(table).count("column 0 of the report") for p in found) == 1
    assert len(found) < 30 and all(p.lead == "" for p in found)


def test_passages_keep_a_closing_heading_line() -> None:
    text = "A paragraph of words here. " * 12 + "\n\n**Total: 4,500 a month**"
    found = passages(text, 30, count_tokens)
    assert "**Total: 4,500 a month**" in found[-1].shown(text)


def test_a_rule_row_is_told_from_a_long_line_of_blanks() -> None:
    from workers.text.markdown import is_rule

    assert is_rule("|---|:--:|---:|") and is_rule("--- | ---") and is_rule("|---|\r")
    assert not is_rule("|--" + " " * 60_000 + "x") and not is_rule("| a | b |")
