"""Ports below the ephemeral range, named when busy; the data-directory lock; children that
die with their parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from streams.settings import Settings
from streams.stack.errors import DataDirInUse, PortInUse
from streams.stack.lock import DataDirLock
from streams.stack.process import (
    PORT_FLOOR,
    claim_port,
    ephemeral_floor,
    free_port,
    port_free,
)
from tests.waiting import wait_until


def test_free_port_is_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    ports = [free_port() for _ in range(50)]
    assert all(PORT_FLOOR <= p < ephemeral_floor() for p in ports)
    assert len(set(ports)) == len(ports)
    admin = free_port(pair_offset=10000)
    assert admin + 10000 < ephemeral_floor()


def test_claim_port_in_use_is_an_error_that_names_it() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 \\(Kafka\\)"):
            claim_port(port, "Kafka")


def test_port_of_a_closed_server_with_lingering_connections_is_free_as_children_bind() -> None:
    """A server that died with clients connected leaves its side in FIN-WAIT-2: a plain bind
    is refused, but the servers we start bind with SO_REUSEADDR and would listen."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", free_port()))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    try:
        accepted.close()  # the server's side closes first (a crash), the client's stays open
        server.close()
        with socket.socket() as plain, pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))  # what the old check did: "already in use"
        assert port_free(port)
        assert claim_port(port, "Kafka") == port
        with socket.socket() as child:
            child.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            child.bind(("127.0.0.1", port))
            child.listen()
    finally:
        client.close()


def test_lock_second_holder_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    first = DataDirLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(
            DataDirInUse, match=f"in use by another lychee up \\(pid {os.getpid()}\\)"
        ):
            DataDirLock(tmp_path).acquire(wait_dead_holder_s=0)
    finally:
        first.release()
    DataDirLock(tmp_path).acquire()  # released: free again


def test_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import time
            from pathlib import Path
            from streams.stack.lock import DataDirLock
            DataDirLock(Path({str(tmp_path)!r})).acquire()
            print("locked", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirInUse, match=f"pid {holder.pid}"):
            DataDirLock(tmp_path).acquire(wait_dead_holder_s=0)
        holder.kill()
        holder.wait(10)
        DataDirLock(tmp_path).acquire(wait_dead_holder_s=0)
    finally:
        holder.kill()
        holder.wait(10)


def gone(pid: int) -> bool:
    """Exited: reaped, or a zombie waiting for its (dead) parent's reaper."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_child_dies_with_its_parent_killed_by_sigkill(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
            import time
            from streams.stack.process import Child
            child = Child("sleeper", ["sleep", "60"])
            child.start()
            print(child.pid, flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    child_pid = 0
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(child_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_until(lambda: gone(child_pid), what=f"the child {child_pid} gone", timeout_s=5)
    finally:
        parent.kill()
        parent.wait(10)
        if child_pid and psutil.pid_exists(child_pid):
            os.kill(child_pid, signal.SIGKILL)


@pytest.mark.parametrize("name", ["stage_fetch_wait_ms", "query_fetch_wait_ms"])
def test_settings_fetch_wait_of_zero_is_refused(name: str) -> None:
    # Tansu answers a fetch with a wait of 0 with no data at all: a consumer would never read
    with pytest.raises(ValueError, match=name):
        Settings.load(None, kafka={name: 0})
