"""`lychee up` as a child process, driven the way a user drives it (the benchmarks and tests
that kill it use this): start, find its endpoints, Ctrl-C or kill -9 it, and count what is
left of its process tree afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from streams.settings import Settings
from streams.stack.endpoints import ENDPOINTS_FILE, Endpoints, read_endpoints
from streams.stack.errors import StackError
from streams.stack.process import log_tail


@dataclass
class UpProcess:
    data_dir: Path
    state_dir: Path  # its XDG_STATE_HOME: the well-known endpoints file stays out of the user's
    proc: subprocess.Popen[bytes]
    log_path: Path
    pids: set[int] = field(default_factory=set)

    @classmethod
    def start(
        cls,
        data_dir: Path,
        state_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> UpProcess:
        data_dir.mkdir(parents=True, exist_ok=True)
        log_path = data_dir.parent / f"{data_dir.name}.up.log"
        child_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("LYCHEE_")},
            "XDG_STATE_HOME": str(state_dir),
            "LYCHEE_LOG_LEVEL": "WARNING",
            **(env or {}),
        }
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "streams.cli",
                    "up",
                    "--data-dir",
                    str(data_dir),
                    "--kafka-port",
                    "0",
                    "--redis-port",
                    "0",
                    "--gateway-port",
                    "0",
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env,
                start_new_session=True,
            )
        return cls(data_dir, state_dir, proc, log_path)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return log_tail(self.log_path, 200)

    def endpoints(self, timeout_s: float = 120.0) -> Endpoints:
        """Its endpoints, once written (the infrastructure is then up and the workers spawned)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise StackError(f"lychee up exited with {self.proc.returncode}:\n{self.output()}")
            found = read_endpoints(self.data_dir / ENDPOINTS_FILE)
            if found is not None and found.pid == self.proc.pid:
                self.remember_tree()
                return found
            time.sleep(0.2)
        raise StackError(f"lychee up wrote no endpoints within {timeout_s:.0f}s:\n{self.output()}")

    def settings(self) -> Settings:
        """Settings of a client of this run; everything else from the environment."""
        return Settings().replaced(**self.endpoints().settings_update())

    def check(self) -> None:
        if not self.alive:
            raise StackError(f"lychee up exited with {self.proc.returncode}:\n{self.output()}")

    def remember_tree(self) -> set[int]:
        """Every process of this run seen so far (restarted workers included)."""
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(self.proc.pid)
            self.pids |= {self.proc.pid, *(p.pid for p in root.children(recursive=True))}
        return self.pids

    def survivors(self) -> list[psutil.Process]:
        """Processes of this run still alive (zombies waiting for a reaper do not count)."""
        alive = []
        for pid in self.pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        return alive

    def kill9(self) -> None:
        self.remember_tree()
        self.proc.kill()
        self.proc.wait(10)

    def interrupt(self, timeout_s: float = 300.0) -> int:
        """Ctrl-C as a terminal sends it, and wait for the exit code."""
        self.remember_tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout_s)

    def wait_gone(self, timeout_s: float = 10.0) -> list[psutil.Process]:
        deadline = time.monotonic() + timeout_s
        while (left := self.survivors()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def cleanup(self) -> None:
        """Whatever happened: nothing of this run stays alive."""
        self.remember_tree()
        for p in self.survivors():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
