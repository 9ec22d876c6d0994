"""The gateway's and `lychee mcp`'s connection to the stack: started before the stack, it
names what is unreachable in one line, bounds each call's wait, and connects on the first
call after the stack is up."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from schemas import Role, Turn
from schemas.gateway import ExchangeIn
from streams.gateway.connection import StackConnection
from streams.gateway.errors import StackUnreachable, Unavailable, reason, redis_at
from streams.settings import Settings
from tests.streams.gateway.conftest import LateStack


def settings(kafka_port: int, redis_port: int, **gateway: Any) -> Settings:
    return Settings.load(
        None,
        kafka={"bootstrap": f"127.0.0.1:{kafka_port}", "idempotence": False},
        redis={"url": f"redis://127.0.0.1:{redis_port}/0"},
        gateway=gateway,
    )


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a broker hung, a firewall)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_redis_at_hides_the_password() -> None:
    s = Settings.load(None, redis={"url": "redis://app:s3cret@cache.internal:6380/2"})
    assert redis_at(s) == "Redis at redis://app:***@cache.internal:6380/2"
    assert "s3cret" not in redis_at(s)


def test_reason_refused_connection_reads_connection_refused() -> None:
    try:
        socket.create_connection(("127.0.0.1", 1), timeout=5)
    except OSError as exc:
        assert reason(exc) == "connection refused"
    else:  # pragma: no cover - something listens on port 1
        pytest.skip("port 1 answers on this machine")


async def test_connection_stack_down_each_call_names_kafka_and_redis_in_one_line(
    late_stack: LateStack,
) -> None:
    s = late_stack.stack
    async with StackConnection(settings(s.kafka_port, s.redis_port)) as conn:
        for _ in range(2):  # every call tries again, and says the same
            with pytest.raises(StackUnreachable) as caught:
                await conn.service()
            detail = caught.value.detail
            assert f"Kafka at 127.0.0.1:{s.kafka_port} (no broker answers)" in detail
            assert f"Redis at redis://127.0.0.1:{s.redis_port}/0 (connection refused)" in detail
            assert "lychee up" in detail and "\n" not in detail
        checks = await conn.readiness()
        assert checks["broker"] == "no broker answers"
        assert checks["redis"] == "connection refused"


async def test_connection_silent_broker_call_waits_at_most_the_connect_timeout(
    silent_port: int, late_stack: LateStack
) -> None:
    s = settings(silent_port, late_stack.stack.redis_port, connect_timeout_s=0.5)
    async with StackConnection(s) as conn:
        for _ in range(2):  # the second call joins the attempt still under way
            with pytest.raises(Unavailable) as caught:
                await conn.service()
            assert not isinstance(caught.value, StackUnreachable)
            assert caught.value.detail.startswith(
                f"still connecting to Kafka at 127.0.0.1:{silent_port} and Redis at "
            )
    # leaving cancels the attempt: nothing is left running (pytest-asyncio would say so)


@pytest.mark.integration
async def test_connection_first_call_after_the_stack_is_up_connects_and_adds(
    late_stack: LateStack,
) -> None:
    s = late_stack.stack
    async with StackConnection(settings(s.kafka_port, s.redis_port)) as conn:
        with pytest.raises(StackUnreachable):
            await conn.service()
        await asyncio.to_thread(late_stack.start)
        service = await conn.service()
        ex = ExchangeIn(session_id="s1", turns=[Turn(role=Role.user, content="hello")])
        receipt = await service.add("late", [ex])
        assert receipt.exchanges[0].seq == 0
        assert await conn.service() is service  # connected once, kept
        status = await service.status("late", "s1")
        assert status.sessions[0].last_seq_accepted == 0


@pytest.mark.integration
async def test_connection_more_redis_callers_than_connections_wait_and_probes_share_a_check(
    late_stack: LateStack,
) -> None:
    """Past the pool's connections a caller waits its turn (it failed at once as "Redis
    down" past redis-py's default 100), and a flood of readiness probes is one check."""
    await asyncio.to_thread(late_stack.start)
    s = late_stack.stack
    async with StackConnection(settings(s.kafka_port, s.redis_port, max_in_flight=4)) as conn:
        service = await conn.service()
        assert service.redis.connection_pool.max_connections == 4 + 16
        waits = [service.redis.blpop(["nothing-here"], timeout=0.2) for _ in range(120)]
        assert await asyncio.gather(*waits) == [None] * 120  # 20 at a time, in six turns
        checks = 0
        check = conn._check

        async def counted() -> dict[str, str]:
            nonlocal checks
            checks += 1
            return await check()

        conn._check = counted  # type: ignore[method-assign]
        probes = await asyncio.gather(*(conn.readiness() for _ in range(300)))
        assert all(p == probes[0] and set(p.values()) == {"ok"} for p in probes)
        assert checks == 1


def test_connection_noise_aiokafka_refusals_pass_once_a_minute_none_while_connecting() -> None:
    from streams.gateway.connection import _ConnectionNoise

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("aiokafka", logging.ERROR, "", 0, msg, ("1", "refused"), None)

    noise = _ConnectionNoise()
    refused = "Unable connect to node with id %s: %s"
    assert [noise.filter(record(refused)) for _ in range(3)] == [True, False, False]
    assert noise.filter(record("Unable to update metadata from %s"))  # another kind
    assert noise.filter(record("Topic %s not found"))  # anything else always
    noise.last.clear()
    noise.attempts = 1
    assert not noise.filter(record(refused))
