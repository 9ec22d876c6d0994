"""Markdown blocks: what a reply is made of, each with its span."""

from __future__ import annotations

from workers.text.markdown import Kind, blocks, heading_text, prose_spans

REPLY = (
    "Sure! Here is a plan:\n\n"
    "## Step 1: Setup\n"
    "Install the package.\n"
    "- First item\n"
    "  continued here\n"
    "- Second item\n"
    "1. numbered\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\ndef f():\n\n    return 1\n```\n"
    "**Notes:**\n"
    "Final words."
)


def test_markdown_blocks_in_order_with_their_kinds_and_spans() -> None:
    found = [(b.kind, b.text(REPLY)) for b in blocks(REPLY)]
    assert found == [
        (Kind.prose, "Sure! Here is a plan:"),
        (Kind.heading, "## Step 1: Setup"),
        (Kind.prose, "Install the package."),
        (Kind.item, "- First item\n  continued here"),
        (Kind.item, "- Second item"),
        (Kind.item, "1. numbered"),
        (Kind.table, "| a | b |\n|---|---|\n| 1 | 2 |"),
        (Kind.code, "```python\ndef f():\n\n    return 1\n```"),  # a blank line inside stays
        (Kind.heading, "**Notes:**"),
        (Kind.prose, "Final words."),
    ]


def test_markdown_unclosed_fence_runs_to_the_end() -> None:
    text = "Run this:\n```sh\npip install x\n\nmore"
    assert [b.kind for b in blocks(text)] == [Kind.prose, Kind.code]
    assert blocks(text)[-1].end == len(text)


def test_markdown_plain_message_is_one_prose_block() -> None:
    text = "  I went to the lake.\nIt was cold!  "
    (only,) = blocks(text)
    assert (only.kind, only.text(text)) == (Kind.prose, "I went to the lake.\nIt was cold!")


def test_markdown_heading_text_and_prose_spans() -> None:
    assert heading_text("### Step 2: Deploy") == "Step 2: Deploy"
    assert heading_text("**Notes:**") == "Notes"
    assert [REPLY[a:b] for a, b in prose_spans(REPLY)][:2] == [
        "Sure! Here is a plan:",
        "Install the package.",
    ]


def test_markdown_blank_message_has_no_blocks() -> None:
    assert blocks(" \n\n \t\n") == []
