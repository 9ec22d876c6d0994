"""The project holds no text of its development data, as each data set's NOTICE asks: no run
of eight words of a dev conversation or question, and no name of a dev conversation's
speaker, is in a file the repository tracks. Examples in tests and docs are made up.

Skips where the data (`../shared/data/`) or a git checkout is absent."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from workers.datasets import role_of

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEV_FILES = (DATA / "locomo" / "locomo-dev.json", DATA / "beam" / "beam-dev.json")
RUN = 8
# markup every page starts with the same way, which a reply about web pages quotes too
BOILERPLATE = ("streams/gateway/console/static/index.html",)
_WORD = re.compile(r"[a-z0-9']+")


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _runs(text: str) -> Iterator[str]:
    words = _WORD.findall(text.lower().replace("’", "'"))
    for i in range(len(words) - RUN + 1):
        yield " ".join(words[i : i + RUN])


def _dev_files() -> list[dict[str, object]]:
    conversations = _read_dev_files()
    if not conversations:
        pytest.skip(f"no development data under {DATA}")
    return conversations


@cache
def _read_dev_files() -> list[dict[str, object]]:
    return [conv for f in DEV_FILES if f.is_file() for conv in json.loads(f.read_text())]


def _tracked() -> dict[str, str]:
    texts = _read_tracked()
    if texts is None:
        pytest.skip("not a git checkout")
    return texts


@cache
def _read_tracked() -> dict[str, str] | None:
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    texts = {}
    for name in filter(None, listed.split("\0")):
        try:
            texts[name] = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted in the work tree
    return texts


def _speakers(conversations: list[dict[str, object]]) -> set[str]:
    names = set()
    for conv in conversations:
        turns = conv.get("conversation")
        if isinstance(turns, dict):
            names |= {str(turns.get(k, "")) for k in ("speaker_a", "speaker_b")}
    return {n for n in names if n.strip() and role_of(n).value != n.strip().lower()}


def test_no_run_of_the_dev_data_is_in_a_tracked_file() -> None:
    conversations = _dev_files()
    said = {hash(r) for conv in conversations for s in _strings(conv) for r in _runs(s)}
    found = [
        f"{name}: {run!r}"
        for name, text in _tracked().items()
        if name not in BOILERPLATE
        for run in _runs(text)
        if hash(run) in said
    ]
    assert found == [], "text of the development data; say it in other words:\n" + "\n".join(
        found[:20]
    )


def test_no_dev_speaker_is_named_in_a_tracked_file() -> None:
    names = _speakers(_dev_files())
    if not names:
        pytest.skip("the development data present names no speaker but by role")
    pattern = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(names)))})\b")
    found = [
        f"{name}: {m.group()}" for name, text in _tracked().items() for m in pattern.finditer(text)
    ]
    assert found == [], "a development conversation's speaker; use a made-up name:\n" + "\n".join(
        found[:20]
    )
