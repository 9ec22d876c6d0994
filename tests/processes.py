"""Python scripts run as processes side by side, for tests of concurrent writers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_together(script: str, *argvs: list[str], timeout_s: float = 240) -> list[int]:
    """Run `script` once per argument list, all at once, from the repository root; their exit
    codes. Every process is killed on the way out, whatever failed."""
    procs = [subprocess.Popen([sys.executable, "-c", script, *a], cwd=ROOT) for a in argvs]
    try:
        return [p.wait(timeout_s) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
