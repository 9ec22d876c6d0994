"""Child processes of the embedded stack: ports, a parent-death signal, stop with a grace.

Every child runs in its own session (so a Ctrl-C reaches the launcher only, which then stops
the children in order) and gets PR_SET_PDEATHSIG=SIGKILL, so that it dies with the launcher
however the launcher dies, kill -9 included. The kernel sends that signal when the *thread*
that forked the child exits, so children are only given it when they are spawned from the
main thread, which lives as long as the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streams.stack.errors import PortInUse, StackError

PORT_FLOOR = 20000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_handed_out: set[int] = set()


def ephemeral_floor() -> int:
    """The lowest port the kernel hands out for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_free(port: int) -> bool:
    """Whether a server could listen on `port` now, as our children would bind it.

    Every server the stack starts (Tansu, Redis, SeaweedFS, the gateway) binds with
    SO_REUSEADDR, so the check does too: right after a crash, the dead process's connections
    linger in FIN-WAIT-2 or TIME-WAIT for up to a minute; without the option they read as a
    port in use, although nothing listens and the child's bind would succeed. A listener
    still refuses the bind, reuse or not.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(pair_offset: int | None = None) -> int:
    """A free loopback port below the ephemeral range, never handed out twice by this process.

    Ports from bind(0) come from the ephemeral range, where an outgoing connection of another
    component can take the port between our check and the child's bind (seen with Tansu and
    SeaweedFS). With `pair_offset`, port + offset must be free (and below the range) too.
    """
    ceiling = ephemeral_floor() - (pair_offset or 0)
    for _ in range(10_000):
        port = random.randint(PORT_FLOOR, ceiling - 1)
        pair = [port] if pair_offset is None else [port, port + pair_offset]
        if any(p in _handed_out for p in pair) or not all(port_free(p) for p in pair):
            continue
        _handed_out.update(pair)
        return port
    raise StackError(f"no free port between {PORT_FLOOR} and {ceiling}")


def claim_port(port: int, what: str) -> int:
    """`port`, or a free one when 0; a port in use is an error that names it."""
    if port == 0:
        return free_port()
    if not port_free(port):
        raise PortInUse(port, what)
    return port


def _pdeathsig(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child between fork and exec: no imports, no locks
        if _libc is not None and _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(121)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(122)

    return preexec


def wait_until(
    ready: Callable[[], bool], timeout_s: float, what: str, proc: subprocess.Popen[bytes] | None
) -> None:
    """Poll `ready` until it holds; a child that exits meanwhile is a failure, whatever its
    exit code (Tansu exits 0 when its port is taken)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            raise StackError(f"exited with {proc.returncode} before {what}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise StackError(f"not {what} after {timeout_s:.0f}s")
        time.sleep(0.05)


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    def listening() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        return False

    wait_until(listening, timeout_s, f"listening on {port}", proc)


# A child's preexec_fn runs the at-fork hooks, and lancedb's warns of a forked runtime at
# each start; the child runs nothing of this process's before it execs.
warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path | None = None
    env: Mapping[str, str] | None = None
    pass_fds: tuple[int, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = field(default=0.0)

    def start(self) -> None:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        on_main = threading.current_thread() is threading.main_thread()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(self.env) if self.env is not None else None,
                start_new_session=True,  # own session: Ctrl-C reaches the launcher, which stops us
                preexec_fn=_pdeathsig(os.getpid()) if on_main else None,
                pass_fds=self.pass_fds,
            )
        finally:
            if self.log_path:
                out.close()  # type: ignore[union-attr]
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float = 10.0) -> None:
        self.kill(signal.SIGTERM)
        self.reap(grace_s)

    def reap(self, grace_s: float) -> None:
        """Wait up to `grace_s` for the process to exit (after a SIGTERM), then SIGKILL it."""
        if self.proc is None:
            return
        if self.alive:
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers in the group

    def log_tail(self, lines: int = 25) -> str:
        return log_tail(self.log_path, lines)


def log_tail(path: Path | None, lines: int = 25) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 64 * 1024))
        text = f.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
