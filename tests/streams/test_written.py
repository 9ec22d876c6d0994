"""The indexer's marks of where it last wrote each namespace, in a real Redis."""

from __future__ import annotations

from redis.asyncio import Redis

from streams.stack.embedded import free_port
from streams.written import WrittenVersions
from workers.store.snapshots import EVERY


async def test_marks_only_rise_and_a_write_to_every_namespace_counts_for_each(redis) -> None:  # type: ignore[no-untyped-def]
    marks = WrittenVersions(redis)
    await marks.record(["a", "b"], {"turns": 4, "records": 2})
    await marks.record(["a"], {"turns": 3})  # a redelivered write read an older version
    await marks.record(None, {"records": 7})  # a forget, retention: every namespace
    assert await marks.of("a", ["turns", "records", "nodes"]) == {
        ("turns", "a"): 4,
        ("records", "a"): 7,
        ("records", EVERY): 7,
    }
    # a namespace the indexer never marked keeps comparing versions
    assert await marks.of("c", ["turns", "records"]) == {("records", EVERY): 7}
    await marks.record(["tenant-x"], {"turns": 1})  # a forget marks what it forgot
    assert not [k async for k in redis.scan_iter(count=1000) if b"tenant-x" in k]


async def test_an_unreachable_redis_leaves_the_reads_to_compare_versions() -> None:
    down = Redis(port=free_port(), socket_connect_timeout=1)
    marks = WrittenVersions(down)
    try:
        assert await marks.of("a", ["turns"]) is None
        assert marks._paused_until > 0  # the next requests do not wait for Redis again
        assert await marks.of("a", ["turns"]) is None
    finally:
        await down.aclose()
