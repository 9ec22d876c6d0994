"""`lychee up` as a user runs it: clients in another shell, supervision, the lock, ports
(kill -9 and Ctrl-C mid-ingest, then resume: `test_up_resume`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from streams.stack import seaweed
from streams.stack.supervisor import read_supervision
from streams.stack.up_process import UpProcess
from tests.streams.stack.conftest import S3Store
from tests.streams.stack.up_helpers import ready, turn_ids
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "deploy" / "demo" / "conversation.jsonl"


def client_env(state_dir: Path) -> dict[str, str]:
    """A fresh shell: no LYCHEE_* variable, only where the user's state lives."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LYCHEE_")}
    return {**env, "XDG_STATE_HOME": str(state_dir), "LYCHEE_LOG_LEVEL": "WARNING"}


def lychee(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- one durable lychee up, its LanceDB on another S3 store, shared by the tests below --------


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, s3_store: S3Store) -> Iterator[UpProcess]:
    root = tmp_path_factory.mktemp("up")
    env = {
        "LYCHEE_LANCEDB_URI": f"s3://{seaweed.BUCKET}/lancedb-up",
        "LYCHEE_LANCEDB_STORAGE_OPTIONS": json.dumps(s3_store.options()),
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "LYCHEE_RESTART_BACKOFF_S": "0.2",
        "LYCHEE_RESTART_MAX_CRASHES": "2",
        "LYCHEE_RESTART_WINDOW_S": "600",
    }
    launcher = UpProcess.start(root / "data", root / "state", env=env)
    try:
        asyncio.run(ready(launcher))
        yield launcher
    finally:
        launcher.cleanup()


def test_up_clients_in_another_shell_need_no_exports(up: UpProcess, s3_store: S3Store) -> None:
    env = client_env(up.state_dir)
    out = lychee(
        env, "ingest", str(DEMO), "--format", "jsonl", "--namespace", "two-shell", "--wait"
    )
    assert out.returncode == 0, out.stderr
    assert "produced 28 exchanges" in out.stdout
    ask = lychee(
        env, "ask", "--namespace", "two-shell", "sourdough starter name", "-k", "3", "--json"
    )
    assert ask.returncode == 0, ask.stderr
    assert json.loads(ask.stdout)["evidence"]
    status = lychee(env, "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["rows"]["turns"] >= 28  # read from the S3 store through the endpoints file
    assert report["supervision"]["pid"] == up.proc.pid
    assert {w["stage"]: w["state"] for w in report["supervision"]["stages"]} == {
        "segmenter": "running",
        "encoder": "running",
        "indexer": "running",
        "query": "running",
        "gateway": "running",
    }
    # indexer and query worked on the S3 LanceDB: rows in the bucket, none in the data dir
    listed = s3_store.client().list_objects_v2(Bucket=seaweed.BUCKET, Prefix="lancedb-up/")
    assert listed["KeyCount"] > 0 and not (up.data_dir / "lancedb").exists()


def test_up_second_launcher_on_the_same_directory_refuses_naming_the_pid(up: UpProcess) -> None:
    out = lychee(
        client_env(up.state_dir),
        "up",
        "--data-dir",
        str(up.data_dir),
        "--kafka-port",
        "0",
        "--redis-port",
        "0",
        timeout=120,
    )
    assert out.returncode == 1
    assert f"{up.data_dir} is in use by another lychee up (pid {up.proc.pid})" in out.stderr
    assert read_supervision(up.data_dir)["pid"] == up.proc.pid  # type: ignore[index]


def test_up_port_in_use_is_an_error_naming_it(up: UpProcess, tmp_path: Path) -> None:
    port = up.endpoints().kafka_bootstrap.rsplit(":", 1)[1]
    out = lychee(
        client_env(tmp_path),
        "up",
        "--data-dir",
        str(tmp_path / "other"),
        "--kafka-port",
        port,
        "--redis-port",
        "0",
        timeout=120,
    )
    assert out.returncode == 1
    assert f"port {port} on 127.0.0.1 (Kafka) is already in use" in out.stderr
    # the gateway's port too, before anything starts (it printed another listener's address)
    args = ["--kafka-port", "0", "--redis-port", "0", "--gateway-port", port]
    out = lychee(client_env(tmp_path), "up", "--data-dir", str(tmp_path / "o2"), *args, timeout=120)
    assert out.returncode == 1, out.stderr
    assert f"port {port} on 127.0.0.1 (the gateway) is already in use" in out.stderr


def test_up_every_listener_is_on_loopback(up: UpProcess) -> None:
    addresses = set()
    for pid in up.remember_tree():
        try:
            conns = psutil.Process(pid).net_connections("inet")
        except psutil.NoSuchProcess:
            continue
        addresses |= {c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN}
    assert addresses == {"127.0.0.1"}


def wait_supervision(
    up: UpProcess, stage: str, check: Any, timeout_s: float = 120
) -> dict[str, Any]:
    def row() -> dict[str, Any] | None:
        report = read_supervision(up.data_dir) or {"stages": []}
        return next((r for r in report["stages"] if r["stage"] == stage), None)

    try:
        found = wait_until(
            row,
            what=f"the supervision of {stage} to hold",
            until=lambda r: r is not None and check(r),
            timeout_s=timeout_s,
            interval_s=0.2,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{up.output()}") from None
    assert found is not None
    return found


def test_up_crashing_worker_is_restarted_then_marked_failed_while_the_rest_serves(
    up: UpProcess,
) -> None:
    first = wait_supervision(up, "encoder", lambda r: r["state"] == "running")
    os.kill(first["pid"], 9)
    second = wait_supervision(
        up, "encoder", lambda r: r["restarts"] == 1 and r["state"] == "running"
    )
    assert second["pid"] != first["pid"] and second["last_exit_code"] == -9
    os.kill(second["pid"], 9)  # the second exit within the window: LYCHEE_RESTART_MAX_CRASHES=2
    failed = wait_supervision(up, "encoder", lambda r: r["state"] == "failed")
    assert failed["restarts"] == 1
    assert "encoder exited with -9, 2 times" in up.output() and "Last lines of" in up.output()
    env = client_env(up.state_dir)
    status = lychee(env, "status")
    assert "encoder    failed" in status.stdout and "failed stages: encoder" in status.stdout
    # the other stages still serve: raw turns are indexed and searchable
    out = lychee(env, "ingest", str(DEMO), "--format", "jsonl", "--namespace", "after-failure")
    assert out.returncode == 0, out.stderr
    settings = up.settings()
    ids = wait_until(
        lambda: turn_ids(settings, "after-failure"),
        what="the 28 turns of after-failure indexed",
        until=lambda found: len(found) >= 28,
        timeout_s=300,
        interval_s=1,
    )
    assert len(ids) == 28
    assert up.alive
