"""Token counts: cut at line starts and kept per line, they are the whole text's counts."""

from __future__ import annotations

import random

import pytest

from workers.tokens import _KEPT_CHARS, count_tokens, encoding


def direct(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "- one line",
        "Memories:\n- first (Date: 2 May 2024)\n- second\n\nRaw Memories:\n(none)",
        "total = add(a, b);\n\n// the sum, then its log\nlog(total)",  # ";\n\n//" is one piece
        "a)\n- b\n  indented under b\n\n\n# Heading\n",
        "line\r\n- after a carriage return\n\tTabbed\n\u00c9t\u00e9\n",
        "special <|endoftext|> text\n<|endoftext|>",
        "word " * (_KEPT_CHARS // 2) + "\n- after a long line",
    ],
)
def test_counts_equal_the_whole_texts(text: str) -> None:
    assert count_tokens(text) == direct(text)


def test_counts_equal_on_texts_of_awkward_characters() -> None:
    pieces = [
        "\n",
        "\n\n",
        " ",
        "  ",
        "/",
        "//",
        ";",
        ")",
        "- ",
        "a",
        "Bc",
        "12345",
        "\u00e9",
        "\t",
        "\r\n",
        "#",
        "```",
        "'s",
        ":",
        "\u4e2d\u6587",
        "|",
        "\u00a0",
    ]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        assert count_tokens(text) == direct(text), repr(text)
