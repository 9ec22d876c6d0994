"""`lychee up` killed with -9 and stopped with Ctrl-C mid-ingest, then started again on the
same data directory: every turn is stored once and no process is left. A module of its own, so
that the other `lychee up` tests' stack is stopped before this one starts two of its own."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import Exchange
from streams.client import MemoryClient
from streams.kafka.lag import PIPELINE, LagReader
from streams.settings import Settings
from streams.stack.up_process import UpProcess
from tests.streams.stack.up_helpers import ready, turn_ids
from tests.streams.test_pipeline import conversation

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


async def produce(settings: Settings, exchanges: list[Exchange], end: bool) -> None:
    async with MemoryClient(settings) as client:
        for i in range(0, len(exchanges), 20):
            await client.add(exchanges[i : i + 20])
        if end:
            last: dict[str, int] = {}
            for ex in exchanges:
                last[ex.session_id] = ex.seq
            for sid, seq in last.items():
                await client.end_session(exchanges[0].namespace, sid, after_seq=seq)


async def lags(settings: Settings) -> dict[str, int]:
    async with LagReader(settings.kafka.bootstrap) as lag:
        return {name: (await lag.stage(name)).lag for name in PIPELINE}


@pytest.fixture
def launchers() -> Iterator[list[UpProcess]]:
    started: list[UpProcess] = []
    yield started
    for launcher in started:
        launcher.cleanup()


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    """Client connections kept open across a stop, as live clients would."""
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def test_up_killed_then_interrupted_mid_ingest_resumes_with_every_turn_once_and_no_process_left(
    tmp_path: Path, launchers: list[UpProcess], held: list[socket.socket]
) -> None:
    """kill -9 mid-stream, a restart on the same ports that resumes from the committed
    offsets, more exchanges, then Ctrl-C mid-stream, which drains every stage within the
    grace: one data directory through both stops, and every turn in it once. The grace
    comes from `--grace`, not the environment: the drain must read it."""
    data, state = tmp_path / "data", tmp_path / "state"
    env = {"LYCHEE_TOPIC_PARTITIONS": "4", "LYCHEE_SEGMENTER_BATCH_SIZE": "4"}
    exchanges = conversation("resume", sessions=3, per_session=40)
    half = len(exchanges) // 2
    up = UpProcess.start(data, state, env=env)
    launchers.append(up)
    settings = asyncio.run(ready(up))
    asyncio.run(produce(settings, exchanges[:half], end=False))
    assert sum(asyncio.run(lags(settings)).values()) > 0, "the kill should land mid-stream"
    kafka = int(settings.kafka.bootstrap.rsplit(":", 1)[1])
    redis = int(settings.redis.url.rsplit(":", 1)[1].split("/")[0])
    held.extend(socket.create_connection(("127.0.0.1", port)) for port in (kafka, redis))
    up.kill9()
    assert up.wait_gone(10) == [], "a process survived kill -9"
    assert (state / "lychee" / "endpoints.json").exists()  # stale: its launcher is gone

    # on the same ports, while the dead servers' connections linger
    ports = ["--kafka-port", str(kafka), "--redis-port", str(redis)]
    up = UpProcess.start(data, state, *ports, "--grace", "300", env=env)
    launchers.append(up)
    settings = asyncio.run(ready(up))
    asyncio.run(produce(settings, exchanges[half:], end=True))
    assert sum(asyncio.run(lags(settings)).values()) > 0, "Ctrl-C should land mid-stream"
    assert up.interrupt() == 0
    out = up.output()
    assert "stopping: draining the stages upstream first" in out
    for stage in ("segmenter", "encoder", "indexer"):
        assert f"  {stage} stopped, its input drained" in out, out
    left = [int(s) for s in re.findall(r"draining \w+ \((\d+)s left\)", out)]
    assert left and 60 < max(left) <= 300, out  # --grace's, not the default 60 s
    assert up.wait_gone(10) == [], "a process survived Ctrl-C"
    assert not (state / "lychee" / "endpoints.json").exists()
    # read from the data directory with nothing running: what the drain stored
    ids = turn_ids(settings, "resume")
    assert sorted(ids) == sorted(t.turn_id for e in exchanges for t in e.turns or [])
