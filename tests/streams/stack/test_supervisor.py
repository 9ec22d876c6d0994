"""Supervision: restart with doubling backoff, give up on a crash loop, keep the rest running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.stack.embedded import Stack
from streams.stack.process import Child
from streams.stack.supervisor import Event, RestartPolicy, Supervisor, read_supervision


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.stop(grace_s=1)


def crasher(tmp_path: Path, started: list[Child], name: str) -> Child:
    """A real process that writes a line to its log and exits with 3."""
    child = Child(
        name,
        ["/bin/sh", "-c", f"echo '{name} is going down'; exit 3"],
        tmp_path / f"{name}.log",
    )
    child.start()
    assert child.proc is not None
    child.proc.wait(10)
    started.append(child)
    return child


def sleeper(tmp_path: Path, started: list[Child], name: str) -> Child:
    child = Child(name, ["sleep", "60"], tmp_path / f"{name}.log")
    child.start()
    started.append(child)
    return child


def test_supervisor_exited_worker_restarts_after_a_doubling_backoff(
    tmp_path: Path, children: list[Child]
) -> None:
    clock = Clock()
    spawned: list[str] = []

    def spawn(name: str) -> Child:
        spawned.append(name)
        return crasher(tmp_path, children, name)

    sup = Supervisor(
        spawn,
        RestartPolicy(backoff_s=1, backoff_max_s=3, max_crashes=10, window_s=100),
        tmp_path / "supervision.json",
        clock,
    )
    sup.add("encoder", crasher(tmp_path, children, "encoder"))
    delays = []
    for _ in range(4):
        [event] = sup.tick()
        assert event.kind == "exited" and "exited with 3" in event.message
        restart_at = sup.stages["encoder"].restart_at
        delays.append(restart_at - clock.now)
        clock.now = restart_at - 0.01
        assert sup.tick() == []  # not before its time
        clock.now = restart_at
        [event] = sup.tick()
        assert event.kind == "restarted"
    assert delays == [1, 2, 3, 3]  # doubling, capped
    assert spawned == ["encoder"] * 4 and sup.stages["encoder"].restarts == 4


def test_supervisor_crash_loop_marks_the_stage_failed_with_its_log_and_keeps_the_rest(
    tmp_path: Path, children: list[Child]
) -> None:
    clock = Clock()
    path = tmp_path / "supervision.json"
    sup = Supervisor(
        lambda n: crasher(tmp_path, children, n),
        RestartPolicy(backoff_s=1, max_crashes=3, window_s=60),
        path,
        clock,
    )
    sup.add("encoder", crasher(tmp_path, children, "encoder"))
    query = sleeper(tmp_path, children, "query")
    sup.add("query", query)
    kinds = []
    for _ in range(10):
        events = sup.tick()
        kinds += [e.kind for e in events if e.stage == "encoder"]
        clock.now += 5
    assert kinds == ["exited", "restarted", "exited", "restarted", "failed"]
    failed = [e for e in sup.tick()]  # nothing more happens to a failed stage
    assert failed == []
    assert sup.failed == ["encoder"]
    assert query.alive and sup.stages["query"].state == "running"
    saved = read_supervision(tmp_path)
    assert saved is not None
    rows = {row["stage"]: row for row in saved["stages"]}
    assert rows["encoder"] == {
        **rows["encoder"],
        "state": "failed",
        "restarts": 2,
        "last_exit_code": 3,
    }
    assert rows["query"]["state"] == "running" and rows["query"]["pid"] == query.pid
    assert saved["failed"] == ["encoder"]


def test_supervisor_failed_event_carries_the_last_lines_of_the_log(
    tmp_path: Path, children: list[Child]
) -> None:
    sup = Supervisor(lambda n: crasher(tmp_path, children, n), RestartPolicy(max_crashes=1))
    sup.add("indexer", crasher(tmp_path, children, "indexer"))
    [event] = sup.tick()
    assert event.kind == "failed" and "marked failed" in event.message
    assert event.log_tail is not None and "indexer is going down" in event.log_tail


def test_supervisor_announces_an_event_before_the_state_file_records_it(
    tmp_path: Path, children: list[Child]
) -> None:
    """A reader that sees `failed` in the file can already read why (the launcher's output)."""
    sup = Supervisor(
        lambda n: crasher(tmp_path, children, n),
        RestartPolicy(max_crashes=1),
        tmp_path / "supervision.json",
    )
    sup.add("indexer", crasher(tmp_path, children, "indexer"))
    seen: list[tuple[str, str]] = []

    def announce(event: Event) -> None:
        saved = read_supervision(tmp_path)
        assert saved is not None
        seen.append((event.kind, saved["stages"][0]["state"]))

    sup.tick(announce)
    assert seen == [("failed", "running")]
    assert read_supervision(tmp_path)["stages"][0]["state"] == "failed"  # type: ignore[index]


def test_supervisor_exits_spread_beyond_the_window_never_fail_the_stage(
    tmp_path: Path, children: list[Child]
) -> None:
    clock = Clock()
    sup = Supervisor(
        lambda n: crasher(tmp_path, children, n),
        RestartPolicy(backoff_s=1, max_crashes=2, window_s=10),
        None,
        clock,
    )
    sup.add("segmenter", crasher(tmp_path, children, "segmenter"))
    for _ in range(6):
        events = sup.tick()  # an exit
        assert [e.kind for e in events] == ["exited"]
        assert sup.stages["segmenter"].restart_at - clock.now == 1  # the first exit in the window
        clock.now += 11
        assert [e.kind for e in sup.tick()] == ["restarted"]
    assert sup.failed == [] and sup.stages["segmenter"].restarts == 6


def test_a_worker_is_started_without_the_variables_lychee_up_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LYCHEE_TOPIC_PARTITION", "3")  # a typo: `lychee up` warned once
    monkeypatch.setenv("LYCHEE_API_KEY", "k")  # read by the clients, not a setting
    monkeypatch.setenv("LYCHEE_SEGMENTER__DELTA", "0.6")
    child = Stack(tmp_path, kafka_port=1, redis_port=2).child(
        "indexer", ["worker", "indexer"], None
    )
    assert "LYCHEE_TOPIC_PARTITION" not in child.env
    assert (child.env["LYCHEE_API_KEY"], child.env["LYCHEE_SEGMENTER__DELTA"]) == ("k", "0.6")
