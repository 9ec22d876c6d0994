"""Fixtures: real Redis, real broker, real workers on free ports; all cleaned up."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from streams.stack.embedded import Child, Stack, free_port, redis_binary, wait_port
from tests.waiting import wait_until


@pytest.fixture(scope="session")
def embedder():  # type: ignore[no-untyped-def]
    from workers.embedding.local import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    data = tmp_path_factory.mktemp("redis")
    child = Child(
        "redis",
        [
            redis_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
    )
    child.start()
    try:
        wait_port(port, 20, child.proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        child.stop()


@pytest.fixture
async def redis(redis_url: str):  # type: ignore[no-untyped-def]
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


def wait_log(stack: Stack, stage: str, text: str, timeout_s: float | None = None) -> None:
    # a shared, busy machine can need longer for workers to load their models
    timeout_s = timeout_s or float(os.environ.get("LYCHEE_TEST_READY_TIMEOUT_S", "180"))
    log = stack.data_dir / "logs" / f"{stage}.log"

    def logged() -> bool:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        child = next((c for c in stack.children if c.name == stage), None)
        if child is not None and not child.alive:
            raise RuntimeError(f"{stage} died:\n{log.read_text(errors='replace')[-3000:]}")
        return False

    wait_until(logged, what=f"{text!r} in {log}", timeout_s=timeout_s, interval_s=0.2)


# small segmenter batches so that a kill lands mid-stream
WORKER_ENV = {
    "LYCHEE_TOPIC_PARTITIONS": "4",
    "LYCHEE_SEGMENTER_BATCH_SIZE": "4",
    "LYCHEE_LOG_LEVEL": "INFO",
    # Tansu answers a fetch when its wait expires: at the default 10 ms the idle query
    # worker used 9.7 % of a core and Tansu 14.6 %, at 50 ms 2.5 % and 8.8 %
    # (docs/decisions.md), and this stack idles through most of the suite. Replies come up
    # to 50 ms later; no test here times them.
    "LYCHEE_QUERY_FETCH_WAIT_MS": "50",
}
READY = {stage: f"{stage}.ready" for stage in ("segmenter", "encoder", "indexer", "query")}


def prepare_onnx() -> None:
    """The ONNX exports (int8, the default, and fp32), once and outside the workers' readiness deadline (a cold
    export takes tens of seconds on a busy machine; a cached one a fraction of a second)."""
    from workers.embedding.model import bundled_path
    from workers.embedding.onnx import default_cache_dir, export_onnx

    export_onnx(bundled_path(), default_cache_dir(), "int8")  # and fp32 on the way


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Broker, Redis and the segmenter, indexer and query workers, as `lychee up` runs them."""
    from streams.apps import STAGES
    from streams.kafka.topics import ensure_topics

    s = Stack(tmp_path_factory.mktemp("stack"))
    s.start_infra()
    try:
        asyncio.run(ensure_topics(s.bootstrap, 4))
        prepare_onnx()
        for stage in STAGES:
            s.start_worker(stage, WORKER_ENV)
        for stage in STAGES:
            wait_log(s, stage, READY[stage])
        yield s
    finally:
        s.stop()


@pytest.fixture
def settings(stack: Stack):  # type: ignore[no-untyped-def]
    from streams.settings import Settings

    return Settings.load(
        None,
        kafka={"bootstrap": stack.bootstrap, "idempotence": False, "topic_partitions": 4},
        redis={"url": stack.redis_url},
        store={"uri": stack.lancedb_uri},
    )
