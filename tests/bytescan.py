"""The byte scan behind every forget test: which files under a directory hold a text."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, needles: list[str]) -> list[str]:
    """Every file under `root` holding one of `needles`, whatever it is (data, deletion,
    manifest, transaction, full-text or vector index file)."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path.relative_to(root)}: {n}" for n in needles if n.encode() in data]
    return hits
