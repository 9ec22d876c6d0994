"""The stack behind the gateway and `lychee mcp`, connected when a call first needs it.

An MCP host starts `lychee mcp` when the host starts, often before `lychee up`; a gateway may
start before its broker. Neither fails for that: the server starts, lists its tools and
answers. A call that needs the stack joins the connection attempt under way or starts one,
and waits for it at most `gateway_connect_timeout_s`; while the stack is down it fails with
one line naming what is unreachable (Kafka at ..., Redis at ...). The first call after the
stack is up connects and is served: nothing needs a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Awaitable
from types import TracebackType

import structlog
from redis.asyncio import BlockingConnectionPool, Redis

from streams.client import MemoryClient
from streams.gateway.errors import StackUnreachable, Unavailable, kafka_at, reason, redis_at
from streams.gateway.service import MemoryService
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway")


class _ConnectionNoise(logging.Filter):
    """aiokafka logs an ERROR line for every refused connection and failed fetch, some 20 a
    second while the broker is down, and an MCP host keeps the server's stderr as its log. While an attempt
    runs they are dropped (its one warning names what is down); otherwise one line of each
    kind passes per minute."""

    KINDS = ("Unable connect to", "Unable to update metadata", "Failed fetch messages from")
    EVERY_S = 60.0

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0
        self.last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.msg if isinstance(record.msg, str) else ""
        if not kind.startswith(self.KINDS):
            return True
        if self.attempts:
            return False
        now = time.monotonic()
        if now - self.last.get(kind, float("-inf")) < self.EVERY_S:
            return False
        self.last[kind] = now
        return True


_NOISE = _ConnectionNoise()
for _name in ("aiokafka", "aiokafka.consumer.fetcher"):  # a logger's filter sees its own lines
    logging.getLogger(_name).addFilter(_NOISE)


# probes within this many seconds share one check: a flood of /readyz (which needs no key)
# is one check a second, not a Redis connection each
READINESS_TTL_S = 1.0
# Redis connections beyond the requests in flight: readiness, status polls, background work
REDIS_SPARE_CONNECTIONS = 16


class StackConnection:
    """One `MemoryService` per process, connected on first use and retried on the next call
    until it connects."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kafka = kafka_at(settings)
        self.redis = redis_at(settings)
        self._service: MemoryService | None = None
        self._attempt: asyncio.Task[MemoryService] | None = None
        self._warm: asyncio.Task[object] | None = None
        self._checking: asyncio.Task[dict[str, str]] | None = None
        self._checked: tuple[float, dict[str, str]] | None = None

    async def __aenter__(self) -> StackConnection:
        """A first attempt and LanceDB's first import (seconds) start in the background: the
        server answers its host at once, and a call finds the stack connected if it is up."""
        self._warm = asyncio.create_task(asyncio.to_thread(importlib.import_module, "lancedb"))
        self._start_attempt()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._attempt is not None and not self._attempt.done():
            self._attempt.cancel()
            await asyncio.gather(self._attempt, return_exceptions=True)
        if self._warm is not None:
            await asyncio.gather(self._warm, return_exceptions=True)
        if self._service is not None:
            service, self._service = self._service, None
            await _discard(service.client, service.redis)

    async def service(self) -> MemoryService:
        """The connected service; raises `Unavailable` (one line) while the stack is down."""
        if self._service is not None:
            return self._service
        attempt = self._start_attempt()
        wait_s = self.settings.gateway.connect_timeout_s
        try:
            async with asyncio.timeout(wait_s):
                return await asyncio.shield(attempt)  # a caller giving up leaves it running
        except TimeoutError as exc:
            raise Unavailable(
                f"still connecting to {self.kafka} and {self.redis} after {wait_s:g}s; "
                "call again in a moment",
                retry_after_s=1.0,
            ) from exc

    async def readiness(self) -> dict[str, str]:
        """`ok` or the reason, for the broker, Redis and LanceDB: one check at a time, its
        answer kept `READINESS_TTL_S` for every probe that asks meanwhile."""
        if self._checked is not None and time.monotonic() - self._checked[0] < READINESS_TTL_S:
            return self._checked[1]
        if self._checking is None or self._checking.done():
            self._checking = asyncio.create_task(self._check())
        checks = await asyncio.shield(self._checking)  # a probe giving up leaves it running
        self._checked = (time.monotonic(), checks)
        return checks

    async def _check(self) -> dict[str, str]:
        try:
            service = await self.service()
        except Unavailable as exc:
            down = {"broker": exc.detail, "redis": exc.detail}
            checks = exc.checks if isinstance(exc, StackUnreachable) else down
            return {**checks, "lancedb": "not checked: the stack is not connected"}
        return await service.readiness()

    def _start_attempt(self) -> asyncio.Task[MemoryService]:
        if self._attempt is None or self._attempt.done():
            self._attempt = asyncio.create_task(self._connect())
            self._attempt.add_done_callback(self._attempted)
        return self._attempt

    def _attempted(self, attempt: asyncio.Task[MemoryService]) -> None:
        """Logged once per attempt, whether or not a caller still waits for it."""
        if attempt.cancelled():
            return
        exc = attempt.exception()
        if exc is None:
            log.info("gateway.stack_connected", kafka=self.kafka, redis=self.redis)
        elif isinstance(exc, StackUnreachable):
            log.warning("gateway.stack_unreachable", detail=exc.detail)
        else:
            log.error("gateway.stack_connect_failed", error=repr(exc))

    async def _connect(self) -> MemoryService:
        s = self.settings
        client = MemoryClient(s)
        # a request waits its turn for a connection (the in-flight bound's own wait), instead
        # of failing at once as "Redis down" past redis-py's default of 100
        pool = BlockingConnectionPool.from_url(
            s.redis.url,
            max_connections=s.gateway.max_in_flight + REDIS_SPARE_CONNECTIONS,
            timeout=s.gateway.queue_timeout_s,
            socket_timeout=10,
            socket_connect_timeout=10,
        )
        redis = Redis.from_pool(pool)  # closed with it
        _NOISE.attempts += 1
        try:
            kafka_error, redis_error = await asyncio.gather(
                self._reason(client.start()), self._reason(redis.ping())
            )
            if kafka_error is None and redis_error is None:
                self._service = MemoryService(s, client, redis)
                return self._service
        except BaseException:
            await _discard(client, redis)
            raise
        finally:
            _NOISE.attempts -= 1
        await _discard(client, redis)
        down = {self.kafka: kafka_error, self.redis: redis_error}
        detail = "the memory stack is not reachable: " + "; ".join(
            f"{what} ({why})" for what, why in down.items() if why is not None
        )
        raise StackUnreachable(
            f"{detail}. Start it with `lychee up` (or set LYCHEE_KAFKA_BOOTSTRAP and "
            "LYCHEE_REDIS_URL to where it runs); the next call connects again",
            {"broker": kafka_error or "ok", "redis": redis_error or "ok"},
        )

    async def _reason(self, step: Awaitable[object]) -> str | None:
        """None when `step` succeeds within the request timeout, else why not, in a few words."""
        budget = self.settings.kafka.request_timeout_s
        try:
            async with asyncio.timeout(budget):
                await step
        except TimeoutError:
            return f"no answer within {budget:g}s"
        except Exception as exc:  # noqa: BLE001 - reported as the reason
            return reason(exc)
        return None


async def _discard(client: MemoryClient, redis: Redis) -> None:
    with contextlib.suppress(Exception):
        await client.close()
    await redis.aclose()
