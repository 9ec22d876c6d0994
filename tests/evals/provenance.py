"""What produced a fitted file: the data, the commit, the command and when.

A fitted artefact the product loads carries these fields so that it can be traced and
refitted: the data file with its digest, the commit of the code that read it (marked when
the work tree had uncommitted changes), and the command line as typed from the repository
root.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def commit() -> str:
    """HEAD's hash, with " (uncommitted changes)" when tracked files differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD") or "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{head} (uncommitted changes)" if dirty else head


def provenance(module: str, data: Path) -> dict[str, str]:
    """The fields `workers.query.scorer.PROVENANCE` names, for a file `module` writes from
    `data` now."""
    return {
        "data": f"{data} (sha256 {digest(data)})",
        "commit": commit(),
        "command": shlex.join(["python", "-m", module, *sys.argv[1:]]),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
