"""The byte scan behind every forget test: which files under a directory hold a text."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, needles: list[str]) -> list[str]:
    """Every file under `root` holding one of `needles`, whatever it is (data, deletion,
    manifest, transaction, full-text or vector index file). A file a compaction removes
    between the listing and the read holds nothing any more."""
    hits = []
    for path in root.rglob("*"):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except FileNotFoundError:
            continue
        hits += [f"{path.relative_to(root)}: {n}" for n in needles if n.encode() in data]
    return hits
