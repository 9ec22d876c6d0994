"""The embedded stack's errors, under the one root error."""

from __future__ import annotations

from pathlib import Path

from schemas.errors import LycheeError


class StackError(LycheeError, RuntimeError):
    """A component of the embedded stack did not start, or the data directory is in use."""


class PortInUse(StackError):
    def __init__(self, port: int, what: str) -> None:
        super().__init__(
            f"port {port} on 127.0.0.1 ({what}) is already in use; choose another "
            "(0 picks a free one)"
        )
        self.port = port


class DataDirInUse(StackError):
    def __init__(self, data_dir: Path, pid: int | None, alive: bool) -> None:
        who = f"pid {pid}" if pid else "another process"
        detail = "" if alive else f"; {who} has exited but processes it started still hold the lock"
        super().__init__(f"{data_dir} is in use by another lychee up ({who}){detail}")
        self.pid = pid
