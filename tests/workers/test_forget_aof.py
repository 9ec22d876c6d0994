"""The append-only file after a forget, against a real Redis of its own (AOF on): a deleted
value leaves the file even when another stage's rewrite was already running."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from streams.stack.embedded import Child, free_port, redis_binary, wait_port
from workers.forget import rewrite_aof


@pytest.fixture
async def aof_redis(tmp_path: Path) -> AsyncIterator[tuple[Redis, Path]]:
    port = free_port()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    child = Child("redis-aof", [redis_binary(), *args, "--save", "", "--appendonly", "yes"])
    child.start()
    client = Redis.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        wait_port(port, 20, child.proc)
        yield client, tmp_path / "appendonly.aof"
    finally:
        await client.aclose()
        child.stop()


async def test_a_rewrite_already_running_is_waited_for_and_followed_by_one_more(
    aof_redis: tuple[Redis, Path],
) -> None:
    redis, aof = aof_redis
    await redis.config_set("rdb-key-save-delay", 100_000)  # 0.1 s a key: the rewrite lasts
    await redis.mset({"secret": "forget-me-7f3a", "other": "kept", "third": "kept"})
    await redis.bgrewriteaof()  # another stage's rewrite, its snapshot taken before the delete
    await redis.delete("secret")
    assert int((await redis.info("persistence"))["aof_rewrite_in_progress"])

    assert await rewrite_aof(redis, timeout_s=30)

    assert b"forget-me-7f3a" not in aof.read_bytes()
    assert await redis.get("other") == b"kept"


async def test_off_when_the_server_keeps_no_append_only_file(redis: Redis) -> None:
    assert await rewrite_aof(redis, timeout_s=5) is False
