"""Two gateway processes with API keys against the session's stack (as two replicas), and
a stack that is not up yet (ports where nothing listens, started later in the test)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
import pytest

from streams.gateway.auth import add_key
from streams.settings import Settings
from streams.stack.embedded import Child, Stack, free_port
from tests.hosts.inspector import Inspector, NoNode, install
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Gateways:
    urls: list[str]
    keys: dict[str, str]  # key name -> key
    env: dict[str, str]
    pids: list[int]

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}


class Running(Protocol):
    """A process to watch while waiting: a `Child`, or `lychee up` itself (`UpProcess`)."""

    @property
    def alive(self) -> bool: ...

    @property
    def log_path(self) -> Path | None: ...


def unreachable() -> Settings:
    """Settings whose broker and Redis are a port nothing listens on."""
    nowhere = free_port()
    return Settings.load(
        None,
        kafka={"bootstrap": f"127.0.0.1:{nowhere}"},
        redis={"url": f"redis://127.0.0.1:{nowhere}/0"},
        gateway={"connect_timeout_s": 1.0},
    )


def wait_ready(url: str, child: Running, timeout_s: float = 240, path: str = "/readyz") -> None:
    """Until `path` answers 200 (`/healthz`: the process is up, with or without its stack)."""

    def answer() -> int | str:
        if not child.alive:
            log = child.log_path.read_text(errors="replace") if child.log_path else ""
            raise RuntimeError(f"gateway exited:\n{log[-3000:]}")
        try:
            return httpx.get(f"{url}{path}", timeout=10).status_code
        except httpx.HTTPError as exc:
            return repr(exc)

    wait_until(
        answer,
        what=f"gateway {url}{path} to answer 200",
        until=lambda status: status == 200,
        timeout_s=timeout_s,
        interval_s=0.5,
    )


@pytest.fixture(scope="session")
def gateways(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    work = tmp_path_factory.mktemp("gateway")
    keys_file = work / "keys.json"
    keys = {
        "a": add_key(keys_file, "a", ["gw-a"]),
        "b": add_key(keys_file, "b", ["gw-b"]),
        "all": add_key(keys_file, "all", ["gw-*"]),
        "root": add_key(keys_file, "root", ["*"]),  # stack-wide: dead letters
    }
    env = {
        **os.environ,
        **stack.env(),
        "LYCHEE_API_KEYS_FILE": str(keys_file),
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "LYCHEE_GATEWAY_MAX_EXCHANGES": "50",
        # a shared 2-core machine can take longer than the default 10 s to ack a burst: an
        # add that times out is answered 503 and, retried after later exchanges of its
        # session were acked, gets a new seq, which the load test's contiguous seqs forbid
        "LYCHEE_GATEWAY_PRODUCE_TIMEOUT_S": "120",
        "LYCHEE_LOG_LEVEL": "INFO",
    }
    children, urls = [], []
    try:
        for i in range(2):
            port = free_port()
            child = Child(
                f"gateway-{i}",
                [
                    sys.executable,
                    "-m",
                    "streams.cli",
                    "gateway",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                work / f"gateway-{i}.log",
                env,
            )
            child.start()
            children.append(child)
            urls.append(f"http://127.0.0.1:{port}")
        for url, child in zip(urls, children, strict=True):
            wait_ready(url, child)
        pids = [child.proc.pid for child in children if child.proc is not None]
        yield Gateways(urls, keys, env, pids)
    finally:
        for child in children:
            child.stop()


@dataclass
class LateStack:
    """Where a stack will run: clients configured for it start before it does."""

    stack: Stack

    def env(self) -> dict[str, str]:
        return self.stack.env()

    def start(self) -> Stack:
        """Broker and Redis on the promised ports, and the topics: what `lychee up` gives a
        client (no workers: nothing here reads). The fixture stops it."""
        self.stack.start_infra()
        self.stack.create_topics()
        return self.stack


@pytest.fixture
def late_stack(tmp_path: Path) -> Iterator[LateStack]:
    """Ports where nothing listens yet; `start()` starts the stack on them."""
    late = LateStack(Stack(tmp_path / "stack", kafka_port=free_port(), redis_port=free_port()))
    try:
        yield late
    finally:
        late.stack.stop()


@pytest.fixture(scope="session")
def inspector(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Inspector:
    """The pinned MCP Inspector CLI, installed with npm once (cached in .pytest_cache)."""
    cache = request.config.cache
    where = cache.mkdir("mcp-inspector") if cache else tmp_path_factory.mktemp("mcp-inspector")
    try:
        entry = install(where)
    except NoNode as exc:
        pytest.skip(str(exc))
    return Inspector(entry, tmp_path_factory.mktemp("inspector-home"))
