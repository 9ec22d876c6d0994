"""Supervision of the workers of `lychee up`: restart with backoff, give up on a crash loop.

A worker that exits (whatever its exit code: nobody asked it to stop) is restarted after a
backoff that doubles with each exit in a row, while the other stages keep serving. After
`max_crashes` exits within `window_s`, the stage is marked failed, the last lines of its log
are reported, and the rest keeps running. The state is written atomically to
`DATA_DIR/supervision.json` at every change, which is what `lychee status` shows.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from streams.stack.process import Child

SUPERVISION_FILE = "supervision.json"
StageState = Literal["running", "backoff", "failed", "stopping", "stopped"]


@dataclass(frozen=True)
class RestartPolicy:
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    max_crashes: int = 5
    window_s: float = 300.0

    def delay(self, exits_in_window: int) -> float:
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** max(0, exits_in_window - 1))


@dataclass
class Stage:
    name: str
    child: Child
    state: StageState = "running"
    restarts: int = 0
    exits: deque[float] = field(default_factory=deque)
    restart_at: float = 0.0
    last_exit_code: int | None = None

    def report(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "state": self.state,
            "pid": self.child.pid if self.state == "running" else None,
            "restarts": self.restarts,
            "last_exit_code": self.last_exit_code,
            "log": str(self.child.log_path) if self.child.log_path else None,
        }


@dataclass(frozen=True)
class Event:
    """Something the launcher tells its user: an exit, a restart, a failed stage."""

    stage: str
    kind: Literal["exited", "restarted", "failed"]
    message: str
    log_tail: str | None = None


class Supervisor:
    def __init__(
        self,
        spawn: Callable[[str], Child],
        policy: RestartPolicy,
        state_path: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        info: dict[str, Any] | None = None,
    ) -> None:
        """`spawn(stage)` builds and starts a new worker process; it is only called from the
        thread that calls `tick` (the main thread: see streams.stack.process)."""
        self.spawn = spawn
        self.policy = policy
        self.state_path = state_path
        self.clock = clock
        self.info = dict(info or {})
        self.stages: dict[str, Stage] = {}

    def add(self, name: str, child: Child) -> None:
        self.stages[name] = Stage(name, child)
        self.save()

    def tick(self, announce: Callable[[Event], None] = lambda event: None) -> list[Event]:
        """Notice exits, restart what is due; returns what happened.

        Each event is `announce`d before the state file records it, so whoever reads a stage's
        new state in the file can already read the message that explains it."""
        now = self.clock()
        events: list[Event] = []
        for stage in self.stages.values():
            if stage.state == "running" and not stage.child.alive:
                events.append(self._exited(stage, now))
            elif stage.state == "backoff" and now >= stage.restart_at:
                stage.child = self.spawn(stage.name)
                stage.state = "running"
                stage.restarts += 1
                events.append(
                    Event(
                        stage.name,
                        "restarted",
                        f"{stage.name} restarted (pid {stage.child.pid}, restart {stage.restarts})",
                    )
                )
        for event in events:
            announce(event)
        if events:
            self.save()
        return events

    def _exited(self, stage: Stage, now: float) -> Event:
        stage.last_exit_code = stage.child.returncode
        stage.exits.append(now)
        while stage.exits and stage.exits[0] < now - self.policy.window_s:
            stage.exits.popleft()
        n = len(stage.exits)
        if n >= self.policy.max_crashes:
            stage.state = "failed"
            return Event(
                stage.name,
                "failed",
                f"{stage.name} exited with {stage.last_exit_code}, {n} times within "
                f"{self.policy.window_s:.0f}s: marked failed, not restarted; the other stages "
                f"keep running. Last lines of {stage.child.log_path}:",
                stage.child.log_tail(),
            )
        delay = self.policy.delay(n)
        stage.state = "backoff"
        stage.restart_at = now + delay
        return Event(
            stage.name,
            "exited",
            f"{stage.name} exited with {stage.last_exit_code}; "
            f"restarting in {delay:.1f}s ({n} exits within {self.policy.window_s:.0f}s)",
        )

    @property
    def failed(self) -> list[str]:
        return [s.name for s in self.stages.values() if s.state == "failed"]

    def mark(self, name: str, state: StageState) -> None:
        self.stages[name].state = state
        self.save()

    def report(self) -> dict[str, Any]:
        return {
            **self.info,
            "stages": [s.report() for s in self.stages.values()],
            "failed": self.failed,
        }

    def save(self) -> None:
        if self.state_path is None:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".supervision-", dir=self.state_path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(self.report(), option=orjson.OPT_INDENT_2))
        os.replace(tmp, self.state_path)


def read_supervision(data_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = orjson.loads((data_dir / SUPERVISION_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data
