"""The official MCP Inspector CLI (npm `@modelcontextprotocol/inspector`), run as an operator
runs it: pinned with its lock in `mcp-inspector/`, installed once with `npm ci` into pytest's
cache (`.pytest_cache/d/mcp-inspector/`), keyed by the digest of the pinned files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PINNED = Path(__file__).parent / "mcp-inspector"
ENTRY = "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
# `lychee mcp` imports for seconds before it answers; a loaded machine makes that longer
CONNECT_TIMEOUT_MS = 180_000


class NoNode(Exception):
    """node or npm is not on PATH: the Inspector cannot run here."""


def install(cache: Path) -> Path:
    """The Inspector's entry point, installed from the lock unless already cached."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise NoNode("node and npm are needed to run the MCP Inspector CLI; not on PATH")
    files = ("package.json", "package-lock.json")
    key = hashlib.sha256(b"".join((PINNED / f).read_bytes() for f in files)).hexdigest()[:16]
    target = cache / key
    if (target / ENTRY).exists():
        return target / ENTRY
    staging = Path(tempfile.mkdtemp(prefix="installing-", dir=cache))
    try:
        for f in files:
            shutil.copy(PINNED / f, staging / f)
        # no install scripts: the package's only one installs its clients' sources, a no-op
        # for a dependency; optional dependencies are the web UI's native bundler
        done = subprocess.run(
            [
                npm,
                "ci",
                "--ignore-scripts",
                "--omit=optional",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci of the MCP Inspector failed:\n{done.stderr[-3000:]}")
        try:
            staging.rename(target)
        except OSError:  # another session installed it meanwhile
            if not (target / ENTRY).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / ENTRY


@dataclass(frozen=True)
class Outcome:
    code: int
    result: dict[str, Any]  # the MCP result, as the Inspector prints it
    stderr: str


@dataclass(frozen=True)
class Inspector:
    entry: Path
    home: Path  # its catalog and client config go here, not to the user's home

    def run(self, *args: str, timeout_s: float = 400) -> Outcome:
        """`mcp-inspector --cli --format json ARGS`: its exit code and the MCP result."""
        argv = [
            "node",
            str(self.entry),
            "--cli",
            "--format",
            "json",
            "--connect-timeout",
            str(CONNECT_TIMEOUT_MS),
            *args,
        ]
        env = {**os.environ, "HOME": str(self.home), "NO_COLOR": "1"}
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the server it spawned too
            out, err = proc.communicate()
            raise AssertionError(f"the Inspector ran over {timeout_s}s:\n{err[-3000:]}") from None
        finally:
            with contextlib.suppress(ProcessLookupError):  # whatever is left of its group
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            result: dict[str, Any] = json.loads(out)["result"]
        except (ValueError, KeyError) as exc:
            raise AssertionError(
                f"no result from the Inspector ({proc.returncode}):\n{err}"
            ) from exc
        return Outcome(proc.returncode, result, err)
