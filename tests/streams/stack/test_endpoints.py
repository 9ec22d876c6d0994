"""Clients find a running `lychee up` through its endpoints file; real variables win."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from streams.stack.endpoints import (
    Endpoints,
    claim_endpoints,
    client_settings,
    process_start,
    read_endpoints,
    remove_endpoints,
    well_known_path,
    write_endpoints,
)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in list(os.environ):
        if name.startswith("LYCHEE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env file here
    return tmp_path / "state"


def endpoints(pid: int | None = None, **kw: object) -> Endpoints:
    pid = pid or os.getpid()
    fields = {
        "kafka_bootstrap": "127.0.0.1:21001",
        "redis_url": "redis://127.0.0.1:21002/0",
        "lancedb_uri": "/data/lancedb",
        "pid": pid,
        "pid_start": process_start(pid),
        "data_dir": "/data",
        "storage": "s3",
        **kw,
    }
    return Endpoints(**fields)  # type: ignore[arg-type]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_endpoints_no_variables_set_client_uses_the_running_stack(state: Path) -> None:
    write_endpoints(endpoints(), well_known_path())
    s = client_settings()
    assert well_known_path() == state / "lychee" / "endpoints.json"
    assert (s.kafka.bootstrap, s.redis.url, s.store.uri) == (
        "127.0.0.1:21001",
        "redis://127.0.0.1:21002/0",
        "/data/lancedb",
    )
    assert s.kafka.idempotence is False


def test_endpoints_one_connection_variable_set_ignores_the_file_entirely(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_endpoints(endpoints(), well_known_path())
    monkeypatch.setenv("LYCHEE_KAFKA_BOOTSTRAP", "kafka.prod:9092")
    s = client_settings()
    assert s.kafka.bootstrap == "kafka.prod:9092"
    assert s.redis.url == "redis://127.0.0.1:6379/0"  # the default, not the file's Redis
    assert s.kafka.idempotence is True


def test_endpoints_idempotence_variable_wins_over_the_file(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_endpoints(endpoints(), well_known_path())
    monkeypatch.setenv("LYCHEE_KAFKA_IDEMPOTENCE", "true")
    s = client_settings()
    assert s.kafka.bootstrap == "127.0.0.1:21001" and s.kafka.idempotence is True


def test_endpoints_file_of_a_dead_launcher_is_ignored(state: Path) -> None:
    write_endpoints(endpoints(dead_pid()), well_known_path())
    assert read_endpoints() is None
    assert client_settings().kafka.bootstrap == "127.0.0.1:9092"


def test_endpoints_reused_pid_with_another_start_time_is_ignored(state: Path) -> None:
    start = process_start(os.getpid())
    assert start is not None
    write_endpoints(endpoints(pid_start=start - 1), well_known_path())
    assert read_endpoints() is None


def test_endpoints_unreadable_file_is_ignored(state: Path) -> None:
    well_known_path().parent.mkdir(parents=True)
    well_known_path().write_text("{half a fi")
    assert read_endpoints() is None


def test_endpoints_write_is_atomic_and_private(state: Path) -> None:
    path = well_known_path()
    write_endpoints(endpoints(), path)
    write_endpoints(endpoints(kafka_bootstrap="127.0.0.1:21009"), path)
    assert [p.name for p in path.parent.iterdir()] == ["endpoints.json"]  # no temporary left
    assert path.stat().st_mode & 0o077 == 0
    found = read_endpoints(path)
    assert found is not None and found.kafka_bootstrap == "127.0.0.1:21009"


def test_endpoints_removed_only_by_the_launcher_that_wrote_them(state: Path) -> None:
    path = well_known_path()
    write_endpoints(endpoints(), path)
    remove_endpoints(path, os.getpid() + 1)
    assert path.exists()
    remove_endpoints(path, os.getpid())
    assert not path.exists()


def test_endpoints_the_mcp_server_and_the_gateway_serve_the_running_stack(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from streams.cli import main
    from streams.cli.common import served_settings

    write_endpoints(endpoints(), well_known_path())
    assert served_settings().store.uri == "/data/lancedb"  # what `lychee gateway` reads
    served: list[str] = []
    monkeypatch.setattr(
        "streams.gateway.mcp.run_stdio", lambda s, namespace: served.append(s.store.uri)
    )
    out = CliRunner().invoke(main, ["mcp"])
    assert (out.exit_code, served) == (0, ["/data/lancedb"]), out.output
    # a second worker of a stage, started by hand beside `lychee up`, joins the same stack
    workers: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(
        "streams.apps.run_worker",
        lambda stage, s: workers.append((stage, s.kafka.bootstrap, s.kafka.idempotence)),
    )
    out = CliRunner().invoke(main, ["worker", "indexer"])
    assert (out.exit_code, workers) == (0, [("indexer", "127.0.0.1:21001", False)]), out.output


def test_endpoints_a_second_launcher_leaves_the_first_ones_file(state: Path) -> None:
    """Two `lychee up` on two data directories: clients without exports keep finding the
    first while it runs; once it is gone, the next launcher takes the file."""
    path = well_known_path()
    first = endpoints(kafka_bootstrap="127.0.0.1:21001")  # this process: alive
    assert claim_endpoints(first, path) is None
    second = endpoints(pid=os.getpid() + 1, kafka_bootstrap="127.0.0.1:21002")
    holder = claim_endpoints(second, path)
    assert holder is not None and holder.kafka_bootstrap == "127.0.0.1:21001"
    found = read_endpoints(path)
    assert found is not None and found.kafka_bootstrap == "127.0.0.1:21001"
    remove_endpoints(path, second.pid)  # the second's stop leaves the first's file
    assert path.exists()
    write_endpoints(endpoints(pid=dead_pid(), kafka_bootstrap="127.0.0.1:21003"), path)
    assert claim_endpoints(second, path) is None  # a dead launcher's file is taken over
    found = read_endpoints(path, live_only=False)
    assert found is not None and found.kafka_bootstrap == "127.0.0.1:21002"
