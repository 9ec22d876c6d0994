"""One stack per data directory: an flock that the kernel releases however its holder dies.

The lock's file descriptor is passed to every child, so the lock is held until the last
process of a stack is gone: a second `lychee up` cannot start while any piece of an old one
still runs on the same directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from streams.stack.errors import DataDirInUse

LOCK_FILE = "lychee.lock"


def pid_alive(pid: int) -> bool:
    """A live process (not a zombie) with this pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    return True


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self.fd: int | None = None

    def acquire(self, wait_dead_holder_s: float = 5.0) -> int:
        """Take the lock and write our pid into it; raise DataDirInUse naming the holder.

        When the recorded holder is dead but the lock is still held, its children are still
        dying (they get SIGKILL with their parent): wait a little for them.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_dead_holder_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._holder(fd)
                alive = holder is not None and pid_alive(holder)
                if alive or time.monotonic() > deadline:
                    os.close(fd)
                    raise DataDirInUse(self.data_dir, holder, alive) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return fd

    @staticmethod
    def _holder(fd: int) -> int | None:
        with contextlib.suppress(ValueError, OSError):
            return int(os.pread(fd, 32, 0).decode().strip() or "0") or None
        return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing our descriptor releases the lock once children are gone
            self.fd = None
