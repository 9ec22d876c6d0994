"""What stands between a Faust agent loop and an exception (DESIGN §9).

Faust acks a message whose handler raised and restarts the actor: the message is lost.
So nothing may escape. Transient failures (broker, Redis, timeouts) are retried with
jittered exponential backoff for as long as they last, which stops consumption (Faust
then pauses the partitions when its buffer is full); any other failure is retried
message by message, and a message that still fails goes to the dead-letter topic
with its original bytes and the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from aiokafka.errors import KafkaError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from schemas import topics as t
from streams import metrics
from streams.producer import KafkaPublisher
from streams.serde import SerdeError
from workers.ports import TemporarilyUnavailable, Unprocessable

log = structlog.get_logger("lychee.guard")

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Worth retrying as is: the infrastructure, not the message, failed."""
    return isinstance(
        exc,
        KafkaError
        | RedisConnectionError
        | RedisTimeoutError
        | ConnectionError
        | TimeoutError
        | OSError,
    )


@dataclass(frozen=True)
class Incoming:
    """A consumed record, as much of it as dead-lettering needs."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @classmethod
    def from_event(cls, event: Any) -> Incoming:
        m = event.message
        return cls(m.topic, m.partition, m.offset, m.key, m.value)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    record: Incoming
    value: T


class DeadLetters:
    def __init__(self, publisher: KafkaPublisher, stage: str) -> None:
        self.publisher = publisher
        self.stage = stage

    async def send(self, record: Incoming, reason: str, error_type: str) -> None:
        headers = [
            ("error", reason[:8000].encode()),
            ("error_type", error_type.encode()),
            ("stage", self.stage.encode()),
            ("source_topic", record.topic.encode()),
            ("source_partition", str(record.partition).encode()),
            ("source_offset", str(record.offset).encode()),
            ("failed_at_ms", str(int(time.time() * 1000)).encode()),
        ]
        metrics.DEAD_LETTERED.labels(self.stage, record.topic, error_type).inc()
        log.warning("message.dead_lettered", topic=record.topic, partition=record.partition,
                    offset=record.offset, error_type=error_type, reason=reason[:500])  # fmt: skip
        await retry_transient(
            lambda: self.publisher.send_raw(
                t.dlq(record.topic), record.value, record.key, headers=headers
            ),
            what="dead-letter",
        )


def _wait_honouring_retry_after(base: Any) -> Callable[[Any], float]:
    """Backoff, but never shorter than a dependency's own Retry-After."""

    def wait(retry_state: Any) -> float:
        delay = float(base(retry_state))
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, TemporarilyUnavailable) and exc.retry_after_s:
            delay = max(delay, exc.retry_after_s)
        return delay

    return wait


async def retry_transient(fn: Callable[[], Awaitable[T]], what: str, max_wait_s: float = 30.0) -> T:
    """Retry `fn` while it fails transiently, without limit; other errors propagate."""
    async for attempt_ctx in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        wait=_wait_honouring_retry_after(wait_random_exponential(multiplier=0.2, max=max_wait_s)),
        reraise=True,
        before_sleep=lambda rs: log.warning(
            "retrying.transient",
            what=what,
            attempt=rs.attempt_number,
            error=repr(rs.outcome.exception()) if rs.outcome else None,
        ),  # fmt: skip
    ):
        with attempt_ctx:
            return await fn()
    raise AssertionError("unreachable")  # pragma: no cover


async def run_guarded(
    stage: str,
    records: Sequence[Incoming],
    parse: Callable[[Incoming], T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    poison_attempts: int = 3,
) -> None:
    """Parse, dead-letter what does not parse, handle the rest; never raises.

    Returns only when every record is either handled or dead-lettered, so that the
    caller's ack (and the offset commit after it) comes after the side effects.
    """
    with metrics.timed_batch(stage, len(records)):
        await _run_guarded(stage, records, parse, handle, dead_letters, poison_attempts)


async def _run_guarded(
    stage: str,
    records: Sequence[Incoming],
    parse: Callable[[Incoming], T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    poison_attempts: int,
) -> None:
    good: list[Parsed[T]] = []
    for rec in records:
        try:
            good.append(Parsed(rec, parse(rec)))
        except SerdeError as exc:
            await dead_letters.send(rec, exc.reason, exc.error_type)
    if not good:
        return
    try:
        await retry_transient(lambda: handle([p.value for p in good]), what=f"{stage} batch")
        return
    except asyncio.CancelledError:
        raise
    except Unprocessable as exc:
        if len(good) == 1:  # nothing to isolate: do not pay for the same failure twice
            await dead_letters.send(good[0].record, str(exc), "unprocessable")
            return
        log.error("batch.failed", stage=stage, size=len(good), error=repr(exc))
    except Exception as exc:  # noqa: BLE001 - isolate the poison message below
        log.error("batch.failed", stage=stage, size=len(good), error=repr(exc))
    # one by one, in order: what succeeded before the failure is redone idempotently
    for p in good:
        await _handle_one(stage, p, handle, dead_letters, poison_attempts)


async def _handle_one(
    stage: str,
    p: Parsed[T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    attempts: int,
) -> None:
    try:
        async for attempt_ctx in AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=0.1, max=2),
            retry=retry_if_exception(lambda e: not isinstance(e, Unprocessable)),
            reraise=True,
        ):
            with attempt_ctx:
                await retry_transient(lambda: handle([p.value]), what=f"{stage} message")
        return
    except asyncio.CancelledError:
        raise
    except Unprocessable as exc:
        await dead_letters.send(p.record, str(exc), "unprocessable")
    except Exception as exc:  # noqa: BLE001
        await dead_letters.send(p.record, f"{type(exc).__name__}: {exc}", "processing")
