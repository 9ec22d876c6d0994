"""Readiness probes that ask the component itself, not its port.

Tansu on S3 opens its port while its store is unreachable and then closes every connection,
so the broker is ready when it answers a Metadata request; Redis when it answers PING.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run_async(factory: Callable[[], Awaitable[T]], timeout_s: float) -> T:
    """Run a coroutine to completion from sync code, whether or not a loop runs here."""

    async def bounded() -> T:
        return await asyncio.wait_for(factory(), timeout_s)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, bounded()).result()


def kafka_ready(port: int, timeout_s: float = 2.0) -> bool:
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    async def metadata() -> None:
        conn = await create_conn("127.0.0.1", port, request_timeout_ms=int(timeout_s * 1000))
        try:
            await conn.send(MetadataRequest([]))
        finally:
            conn.close()

    try:
        run_async(metadata, timeout_s)
    except Exception:  # any failure to answer means not ready yet
        return False
    return True


def redis_ready(port: int, timeout_s: float = 1.0) -> bool:
    import redis

    client = redis.Redis(
        host="127.0.0.1", port=port, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()
