"""`lychee up`: the embedded stack as a single-machine deployment.

Start: lock the data directory, start SeaweedFS, the broker and Redis (each ready before the
next), create the topics, start the workers, write the endpoints for clients. Run: supervise
the workers (`streams.stack.supervisor`); an infrastructure process that dies ends the run.
Stop (Ctrl-C or SIGTERM): withdraw the endpoints (new clients no longer find the stack), then
let the stages drain in flow order: each stage stops once its input lag is 0, so what it
publishes while stopping is still read by the stages after it; a grace period bounds the
whole drain. Then Redis, the broker and SeaweedFS stop. A second Ctrl-C stops at once. On a
durable stack whatever is left in the topics is processed at the next start.

Threads: children are only spawned from the main thread (their parent-death signal fires when
the thread that forked them exits). Lag polls and the readiness probe run on an event loop in
a helper thread, which never spawns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from streams.kafka.lag import PIPELINE, Lag, LagReader
from streams.settings import Settings
from streams.stack.embedded import Stack, StackPreset
from streams.stack.endpoints import (
    ENDPOINTS_FILE,
    Endpoints,
    claim_endpoints,
    process_start,
    remove_endpoints,
    well_known_path,
    write_endpoints,
)
from streams.stack.errors import StackError
from streams.stack.process import Child
from streams.stack.supervisor import SUPERVISION_FILE, Event, RestartPolicy, Supervisor

T = TypeVar("T")
# stage -> the lags that must be 0 before it stops (its own input; the indexer reads two topics)
DRAIN_ORDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("segmenter", ("segmenter",)),
    ("encoder", ("encoder",)),
    ("indexer", ("indexer", "indexer-records")),
    ("query", ()),
)
POLL_S = 0.5
GATEWAY = "gateway"  # supervised like a stage; stopped first, so intake ends before the drain


class Interrupted(Exception):
    """A second Ctrl-C: stop at once."""


class LoopThread:
    """An event loop on a daemon thread, for the launcher's async reads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lychee-io", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


@dataclass
class Signals:
    stop: bool = False
    now: bool = False

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop and signum == signal.SIGINT:
            self.now = True
        self.stop = True


class Launcher:
    def __init__(
        self,
        data_dir: Path,
        preset: StackPreset,
        settings: Settings,
        kafka_port: int = 9092,
        redis_port: int = 6379,
        gateway_port: int | None = None,
        echo: Callable[[str], None] = click.echo,
    ) -> None:
        lancedb = settings.store.uri if "uri" in settings.store.model_fields_set else None
        self.stack = Stack(
            data_dir, kafka_port, redis_port, preset, lancedb, settings.store.storage_options
        )
        self.stack.gateway_port = gateway_port
        self.settings = settings
        self.echo = echo
        self.signals = Signals()
        self.io = LoopThread()
        self.lag: LagReader | None = None
        self.ready: concurrent.futures.Future[float] | None = None
        self.other: Endpoints | None = None  # another launcher's, holding the well-known file
        self.endpoint_paths = [data_dir / ENDPOINTS_FILE, well_known_path()]
        self.supervisor = Supervisor(
            self._respawn,
            RestartPolicy(
                settings.stack.restart_backoff_s,
                settings.stack.restart_backoff_max_s,
                settings.stack.restart_max_crashes,
                settings.stack.restart_window_s,
            ),
            data_dir / SUPERVISION_FILE,
            info={
                "pid": os.getpid(),
                "data_dir": str(data_dir),
                "storage": preset.storage,
                "preset": preset.name,
                "ready": False,
                "state": "starting",
            },
        )

    # -- run ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Until stopped; the exit code of `lychee up`."""
        self.signals.install()
        try:
            self._start()
            code = 0 if self.signals.stop else self._serve()
            self._stop(drain=not self.signals.now and code == 0)
            return code
        except Interrupted:
            self._stop(drain=False)
            return 130
        except BaseException:
            self._stop(drain=False)
            raise
        finally:
            self.io.close()

    def _start(self) -> None:
        from streams.apps import STAGES

        stack = self.stack
        started = time.monotonic()
        stack.start_infra()
        self.settings = stack.create_topics(self.settings)  # `--grace` and the like stay
        for stage in STAGES:
            self.supervisor.add(stage, stack.start_worker(stage))
        if stack.gateway_port is not None:
            self.supervisor.add(GATEWAY, stack.start_gateway())
        self._write_endpoints()
        self.supervisor.info["state"] = "running"
        self.supervisor.save()
        self._announce(time.monotonic() - started)
        self.ready = self.io.submit(self._probe_ready())

    def _announce(self, took_s: float) -> None:
        stack, preset = self.stack, self.stack.preset
        storage = (
            f"durable: broker on S3 (SeaweedFS) in {stack.data_dir / 'weed'}, Redis fsyncs every write"
            if preset.storage == "s3"
            else "ephemeral: broker in memory, Redis without persistence"
        )
        self.echo(f"lychee is up in {took_s:.1f}s ({storage})")
        self.echo(
            f"  kafka {stack.bootstrap}  redis {stack.redis_url}  lancedb {stack.lancedb_uri}"
        )
        if self.other is None:
            self.echo(
                f"  clients in another shell find it through {self.endpoint_paths[1]} "
                "(no exports needed; LYCHEE_* variables win)"
            )
        else:
            self.echo(
                f"  clients without exports find the other lychee up (pid {self.other.pid}, "
                f"{self.other.data_dir}); this one's need: export "
                f"LYCHEE_KAFKA_BOOTSTRAP={stack.bootstrap} LYCHEE_KAFKA_IDEMPOTENCE=false "
                f"LYCHEE_REDIS_URL={stack.redis_url} "
                f"LYCHEE_LANCEDB_URI={stack.lancedb_uri}"
                + (
                    f" and LYCHEE_LANCEDB_STORAGE_OPTIONS as in {self.endpoint_paths[0]}"
                    if stack.lancedb_options
                    else ""
                )
                + f"; `lychee status --data-dir {stack.data_dir}` shows its workers"
            )
        if stack.gateway_port is not None:
            self.echo(f"  console {stack.gateway_url}/")
            self.echo(f"  gateway {stack.gateway_url} (OpenAPI at /docs, MCP at /mcp)")
        self.echo(f"  logs in {stack.logs}; Ctrl-C drains and stops (twice: stops at once)")

    async def _probe_ready(self) -> float:
        from streams.stack.ready import wait_workers

        def check() -> None:
            if self.signals.stop:
                raise Interrupted

        started = time.monotonic()
        await wait_workers(self.settings, timeout_s=600, check=check)
        return time.monotonic() - started

    def _serve(self) -> int:
        while not self.signals.stop:
            self._tick()
            dead = [c for c in self.stack.infra if not c.alive]
            if dead:
                for child in dead:
                    self.echo(
                        f"{child.name} exited with {child.returncode}: stopping the stack. "
                        f"Last lines of {child.log_path}:\n{child.log_tail()}"
                    )
                return 1
            time.sleep(POLL_S)
        return 0

    def _tell(self, event: Event) -> None:
        self.echo(event.message)
        if event.log_tail:
            self.echo(event.log_tail)

    def _tick(self) -> None:
        self.supervisor.tick(self._tell)
        if self.ready is not None and self.ready.done():
            try:
                self.echo(
                    f"workers ready: segmenter consumes, query answers ({self.ready.result():.1f}s)"
                )
                self.supervisor.info["ready"] = True
                self.supervisor.save()
            except Interrupted:
                pass
            except Exception as exc:  # the probe gave up: say so, keep serving
                self.echo(f"workers not ready: {exc}")
            self.ready = None

    # -- stop --------------------------------------------------------------------------------

    def _stop(self, drain: bool) -> None:
        if self.stack.lock is None:  # never started (the directory is another launcher's)
            return
        for path in self.endpoint_paths:
            remove_endpoints(path, os.getpid())  # first: no new client finds a stopping stack
        self.supervisor.info["state"] = "stopping"
        self.supervisor.save()
        if GATEWAY in self.supervisor.stages:  # intake first
            self._stop_stage(GATEWAY, grace_s=0.0 if self.signals.now else 10.0)
        if drain and self.stack.workers:
            self.echo("stopping: draining the stages upstream first (Ctrl-C again: stop at once)")
            try:
                self._drain(time.monotonic() + self.settings.stack.drain_grace_s)
            except Interrupted:
                self.echo("stopping at once")
        self._stop_workers(grace_s=0.0 if self.signals.now else 10.0)
        self.echo("workers stopped; stopping Redis, the broker and SeaweedFS")
        if self.lag is not None:
            self.io.submit(self.lag.__aexit__(None, None, None))
        self.stack.stop(grace_s=3.0 if self.signals.now else 10.0)
        self.supervisor.info["state"] = "stopped"
        for stage in self.supervisor.stages.values():
            stage.state = "stopped" if stage.state != "failed" else "failed"
        self.supervisor.save()
        self.echo("stopped")

    def _drain(self, deadline: float) -> None:
        last_print = 0.0
        for stage, inputs in DRAIN_ORDER:
            if stage not in self.supervisor.stages:
                continue
            while True:
                if self.signals.now:
                    raise Interrupted
                self._tick()
                lags = self._lags()
                if time.monotonic() - last_print >= 2.0:
                    self.echo(self._progress(stage, lags, deadline))
                    last_print = time.monotonic()
                if self._drained(stage, inputs, lags):
                    break
                if time.monotonic() > deadline:
                    self.echo(
                        f"grace period over ({self.settings.stack.drain_grace_s:.0f}s), still lagging: "
                        + self._lag_line(lags)
                        + (
                            "; the rest is processed at the next start"
                            if self.stack.preset.storage == "s3"
                            else "; on an ephemeral stack the rest is lost"
                        )
                    )
                    return
                time.sleep(POLL_S)
            failed = self.supervisor.stages[stage].state == "failed"
            self._stop_stage(stage, grace_s=10.0)
            self.echo(
                f"  {stage} stopped" + ("" if failed or not inputs else ", its input drained")
            )
        self.echo("drained: " + self._lag_line(self._lags()))

    def _drained(self, stage: str, inputs: tuple[str, ...], lags: dict[str, Lag] | None) -> bool:
        if self.supervisor.stages[stage].state == "failed":
            return True  # nothing will consume its input: do not wait for it
        return lags is not None and all(lags[name].lag == 0 for name in inputs)

    def _lags(self) -> dict[str, Lag] | None:
        async def read() -> dict[str, Lag]:
            if self.lag is None:
                self.lag = await LagReader(self.stack.bootstrap).__aenter__()
            return {name: await self.lag.stage(name) for name in PIPELINE}

        try:
            return self._wait(self.io.submit(read()), 15.0)
        except (TimeoutError, concurrent.futures.TimeoutError, OSError, StackError) as exc:
            self.echo(f"lag unreadable: {exc}")
            return None
        except Exception as exc:  # a broker error: report it, the grace period still bounds us
            self.echo(f"lag unreadable: {type(exc).__name__}: {exc}")
            return None

    def _wait(self, fut: concurrent.futures.Future[T], timeout_s: float) -> T:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.signals.now:
                fut.cancel()
                raise Interrupted
            try:
                return fut.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if time.monotonic() > deadline:
                    fut.cancel()
                    raise

    def _progress(self, stage: str, lags: dict[str, Lag] | None, deadline: float) -> str:
        left = max(0.0, deadline - time.monotonic())
        return f"  draining {stage} ({left:.0f}s left): {self._lag_line(lags)}"

    @staticmethod
    def _lag_line(lags: dict[str, Lag] | None) -> str:
        if lags is None:
            return "lag unknown"
        return ", ".join(f"{name} lag {lag.lag}" for name, lag in lags.items())

    def _stop_stage(self, stage: str, grace_s: float) -> None:
        self.supervisor.mark(stage, "stopping")
        child = self.supervisor.stages[stage].child
        self._stop_child(child, grace_s)
        self.supervisor.mark(stage, "stopped")

    def _stop_workers(self, grace_s: float) -> None:
        """All at once: each stage's shutdown (seconds of leaving its consumer group) overlaps
        the others' instead of adding up; what the drain left is read at the next start."""
        stages = [
            stage
            for stage, _ in DRAIN_ORDER
            if (state := self.supervisor.stages.get(stage)) is not None
            and state.state not in ("stopped", "failed")
        ]
        for stage in stages:
            self.supervisor.mark(stage, "stopping")
        supervised = [self.supervisor.stages[stage].child for stage in stages]
        unsupervised = [c for c in self.stack.workers if c not in supervised]  # never today
        self._stop_children([*supervised, *unsupervised], grace_s)
        for stage in stages:
            self.supervisor.mark(stage, "stopped")

    def _stop_child(self, child: Child, grace_s: float) -> None:
        self._stop_children([child], grace_s)

    def _stop_children(self, children: list[Child], grace_s: float) -> None:
        """SIGTERM, then SIGKILL after the grace or at a second Ctrl-C."""
        live = [child for child in children if child.alive]
        for child in live:
            child.kill(signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
        deadline = time.monotonic() + grace_s
        while (
            any(child.alive for child in live)
            and time.monotonic() < deadline
            and not self.signals.now
        ):
            time.sleep(0.05)
        for child in live:
            child.stop(grace_s=0.0)

    # -- helpers -----------------------------------------------------------------------------

    def _respawn(self, stage: str) -> Child:
        self.stack.children[:] = [c for c in self.stack.children if c.name != stage]
        return self.stack.start_gateway() if stage == GATEWAY else self.stack.start_worker(stage)

    def _write_endpoints(self) -> None:
        stack = self.stack
        endpoints = Endpoints(
            kafka_bootstrap=stack.bootstrap,
            redis_url=stack.redis_url,
            lancedb_uri=stack.lancedb_uri,
            pid=os.getpid(),
            pid_start=process_start(os.getpid()),
            data_dir=str(stack.data_dir),
            storage=stack.preset.storage,
            kafka_idempotence=False,
            s3_endpoint=stack.s3_endpoint,
            lancedb_storage_options=dict(stack.lancedb_options),
        )
        data_file, well_known = self.endpoint_paths
        write_endpoints(endpoints, data_file)
        self.other = claim_endpoints(endpoints, well_known)


def run_up(
    data_dir: Path,
    preset: StackPreset,
    settings: Settings,
    kafka_port: int,
    redis_port: int,
    gateway_port: int | None = None,
) -> int:
    return Launcher(data_dir, preset, settings, kafka_port, redis_port, gateway_port).run()
