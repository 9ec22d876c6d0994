"""Texts of every kind an embedder is given, and a store's refusal of another model."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.store import EmbeddingMismatch, EvidenceStore


def refusal(db: Path, written: tuple[str, int], read: tuple[str, int]) -> str:
    """What a store written with the model `written` (name, dimension) says to `read`."""
    EvidenceStore(str(db), *written).table("records", create=True)
    with pytest.raises(EmbeddingMismatch) as refused:
        EvidenceStore(str(db), *read).table("records")
    return str(refused.value)


def varied_texts() -> list[str]:
    """Short, long (truncated at 256 tokens), empty, unicode, numbers, mixed batches."""
    words = [
        "river",
        "budget",
        "violin",
        "quarterly",
        "migraine",
        "telescope",
        "harvest",
        "ledger",
        "orbit",
        "pottery",
    ]
    out = ["", " ", "a", "OK", "12:45 on 2023-05-07", "Ünïcödé café ☕ 🎉 日本語 Ελληνικά"]
    for i in range(60):
        n = 1 + (i * 7) % 40
        out.append(
            " ".join(words[(i + j) % len(words)] for j in range(n)) + ("?" if i % 3 else ".")
        )
    out.append(" ".join(words * 60))  # far past the 256-token limit
    return out
