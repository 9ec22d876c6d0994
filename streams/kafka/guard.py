"""What stands between a Faust agent loop and an exception (DESIGN §9).

Faust acks a message whose handler raised and restarts the actor: the message is lost.
So nothing may escape. Failures split in two:
- not the message's fault: a dependency that is down, rate-limited or refusing our
  configuration (`is_transient`), or our own code or a library failing (systemic, see
  `streams.kafka.pauses`). The stage pauses on the same work, retrying it with jittered
  exponential backoff for as long as it lasts, and says why once per
  `TransientPolicy.log_every_s`; nothing is dropped;
- the message's fault (it cannot be parsed, our code names it unprocessable, its output can
  never be sent, or it fails alone where its neighbours pass): retried message by message to
  isolate it, then it goes to the dead-letter topic with its original bytes and the reason
  (`lychee dlq replay` brings it back once the cause is mended), and the stage moves on.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from schemas import topics as t
from streams import metrics
from streams.kafka.errors import SerdeError
from streams.kafka.fetch import COVERED, UNDECODABLE, take_undecodable
from streams.kafka.pauses import (
    PAUSE,
    POISON,
    SYSTEMIC,
    PauseLog,
    Streak,
    describe,
    is_programming_error,
    streak_of,
    taking_turns,
    tenant_of,
)
from streams.kafka.producer import DEFAULT_MAX_REQUEST_BYTES
from streams.kafka.rules import PROCESSING, is_transient, reason_code, waits, waits_for
from streams.kafka.serde import SCHEMA
from workers.errors import TemporarilyUnavailable, UnprocessableReply

log = structlog.get_logger("lychee.guard")

T = TypeVar("T")

ORIGINAL = "original."  # prefix of the original message's headers on its dead letter
REPLAY_HEADER = "lychee-replay"  # set by `lychee dlq replay` on what it produces again


@dataclass(frozen=True)
class TransientPolicy:
    """How failures that are not a message's fault are waited out: full-jitter backoff up to
    `max_wait_s` (never shorter than a dependency's Retry-After), one log line per
    `log_every_s`, and the streak of same-error messages (`systemic_streak`) past which they
    stop being dead-lettered one by one and pause the stage instead."""

    max_wait_s: float = 30.0
    log_every_s: float = 60.0
    base_wait_s: float = 0.2
    systemic_streak: int = 3

    @classmethod
    def from_settings(cls, settings: Any) -> TransientPolicy:
        return cls(
            max_wait_s=settings.kafka.transient_max_wait_s,
            log_every_s=settings.kafka.pause_log_interval_s,
            systemic_streak=settings.kafka.systemic_streak,
        )


DEFAULT_POLICY = TransientPolicy()


@dataclass(frozen=True)
class Incoming:
    """A consumed record, as much of it as dead-lettering needs.

    `undecodable` is set for the marker that stands in for a record batch the consumer
    could not decode (streams.kafka.fetch): the reason, to be dead-lettered as such.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    undecodable: str | None = None

    @classmethod
    def from_event(cls, event: Any) -> Incoming:
        m = event.message
        headers = tuple(m.headers or ())
        marker = take_undecodable(m.topic, m.partition, m.offset) if m.value is None else None
        return cls(m.topic, m.partition, m.offset, m.key, m.value, headers, marker)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    record: Incoming
    value: T


def _h(text: str) -> bytes:
    """A header value that can always be encoded, whatever the text holds."""
    return text.encode("utf-8", "backslashreplace")


class DeadLetters:
    """Writes `<topic>.dlq`: original key and bytes, the reason in headers.

    Headers: `error` (the reason, naming the field or the problem), `error_type` (its
    code: json, schema, too_large, unprocessable...), `stage`, `source_topic`,
    `source_partition`, `source_offset`, `failed_at_ms`; `value_null` when the original value
    was null (Kafka clients refuse a record with neither key nor value, so it goes as b"");
    `value_dropped`, `value_size`, `value_sha256` when the original was too large to copy
    (it stays in the source topic at that offset); the original's own headers, each name
    prefixed with `ORIGINAL` (so that `lychee dlq replay` can restore them, whatever their
    names). `send` never raises (but cancellation).
    """

    HEADROOM_BYTES = 64 * 1024  # headers and record framing

    def __init__(
        self, publisher: Any, stage: str, policy: TransientPolicy = DEFAULT_POLICY
    ) -> None:
        self.publisher = publisher
        self.stage = stage
        self.policy = policy

    def _headers(self, record: Incoming, reason: str, error_type: str) -> list[tuple[str, bytes]]:
        return [
            ("error", _h(reason[:8000])),
            ("error_type", _h(error_type)),
            ("stage", _h(self.stage)),
            ("source_topic", _h(record.topic)),
            ("source_partition", str(record.partition).encode()),
            ("source_offset", str(record.offset).encode()),
            ("failed_at_ms", str(int(time.time() * 1000)).encode()),
            *((ORIGINAL + name, value) for name, value in record.headers),
        ]

    async def send(self, record: Incoming, reason: str, error_type: str) -> None:
        headers = self._headers(record, reason, error_type)
        value, key = record.value, record.key
        if value is None:
            value = b""
            headers.append(("value_null", b"1"))
        metrics.DEAD_LETTERED.labels(self.stage, record.topic, error_type).inc()
        log.warning(
            "message.dead_lettered",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            error_type=error_type,
            reason=reason[:500],
        )
        limit = getattr(self.publisher, "max_request_bytes", DEFAULT_MAX_REQUEST_BYTES)
        fits = len(value) + len(key or b"") + self.HEADROOM_BYTES <= limit
        if fits and await self._try(record, value, key, headers):
            return
        await self._try(
            record, b"", key if len(key or b"") <= 1024 else None, headers + _dropped(value, key)
        )

    async def _try(
        self, record: Incoming, value: bytes, key: bytes | None, headers: list[tuple[str, bytes]]
    ) -> bool:
        try:
            await retry_transient(
                lambda: self.publisher.send_raw(t.dlq(record.topic), value, key, headers=headers),
                what=f"{self.stage} dead-letter",
                policy=self.policy,
            )
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a dead letter must never take the stage down
            log.error(
                "dead_letter.failed",
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
                bytes=len(value),
                error=describe(exc, 500),
                note="the original stays in the source topic at this offset",
            )
            return False


def _dropped(value: bytes, key: bytes | None) -> list[tuple[str, bytes]]:
    out = [
        ("value_dropped", b"1"),
        ("value_size", str(len(value)).encode()),
        ("value_sha256", hashlib.sha256(value).hexdigest().encode()),
    ]
    if key is not None and len(key) > 1024:
        out.append(("key_size", str(len(key)).encode()))
    return out


def _wait_honouring_retry_after(base: Any) -> Callable[[Any], float]:
    """Backoff, but never shorter than a dependency's own Retry-After."""

    def wait(retry_state: Any) -> float:
        delay = float(base(retry_state))
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, TemporarilyUnavailable) and exc.retry_after_s:
            delay = max(delay, exc.retry_after_s)
        return delay

    return wait


async def retry_transient(
    fn: Callable[[], Awaitable[T]],
    what: str,
    policy: TransientPolicy = DEFAULT_POLICY,
    rule: Callable[[BaseException], bool] = is_transient,
    stage: str | None = None,
    kind: str | None = None,
) -> T:
    """Retry `fn` while it fails by `rule` (default: transiently), without limit; other
    errors propagate. The pause is logged and measured as `kind` (default: systemic for a
    programming error, else transient) under `stage` (default: the first word of `what`)."""
    pause = PauseLog(what, policy.log_every_s, stage)

    def failed(rs: Any) -> None:
        exc = rs.outcome.exception() if rs.outcome else None
        auto = SYSTEMIC if exc is not None and is_programming_error(exc) else "transient"
        pause.failed(rs.attempt_number, exc, kind or auto)

    try:
        async for attempt_ctx in AsyncRetrying(
            retry=retry_if_exception(rule),
            wait=_wait_honouring_retry_after(
                wait_random_exponential(multiplier=policy.base_wait_s, max=policy.max_wait_s)
            ),
            reraise=True,
            before_sleep=failed,
        ):
            with attempt_ctx:
                result = await fn()
                pause.succeeded(attempt_ctx.retry_state.attempt_number)
                return result
    finally:
        pause.close()
    raise AssertionError("unreachable")  # pragma: no cover


async def run_guarded(
    stage: str,
    records: Sequence[Incoming],
    parse: Callable[[Incoming], T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    poison_attempts: int = 3,
    policy: TransientPolicy = DEFAULT_POLICY,
) -> None:
    """Parse, dead-letter what does not parse, handle the rest; never raises (but
    cancellation).

    Returns only when every record is either handled or dead-lettered, so that the
    caller's ack (and the offset commit after it) comes after the side effects; a failure
    that is not a message's fault keeps it waiting, paused, until the cause is mended.
    """

    replayed = sum(1 for r in records if any(k == REPLAY_HEADER for k, _ in r.headers))
    if replayed:
        metrics.MESSAGES_REPLAYED.labels(stage, records[0].topic).inc(replayed)

    async def attempt() -> None:
        with metrics.timed_batch(stage, len(records)):
            await _run(stage, records, parse, handle, dead_letters, poison_attempts, policy)

    # A failure of the guard itself is ours, never the batch's: pause and redo the batch
    # (every handler is idempotent), rather than dead-letter good messages.
    await retry_transient(
        attempt,
        what=f"{stage} guard",
        policy=policy,
        stage=stage,
        kind=SYSTEMIC,
        rule=lambda e: isinstance(e, Exception),
    )


async def _run(
    stage: str,
    records: Sequence[Incoming],
    parse: Callable[[Incoming], T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    poison_attempts: int,
    policy: TransientPolicy,
) -> None:
    good: list[Parsed[T]] = []
    for rec in records:
        if rec.undecodable is not None:
            if rec.undecodable != COVERED:
                await dead_letters.send(rec, rec.undecodable, UNDECODABLE)
            continue
        try:
            good.append(Parsed(rec, parse(rec)))
        except SerdeError as exc:
            await dead_letters.send(rec, exc.reason, exc.error_type)
        except Exception as exc:  # noqa: BLE001 - any parse failure is the message's fault
            await dead_letters.send(rec, f"cannot be parsed: {describe(exc)}", SCHEMA)
    if not good:
        return
    try:
        await retry_transient(
            lambda: handle([p.value for p in good]),
            what=f"{stage} batch",
            policy=policy,
            rule=waits_for(p.value for p in good),
            stage=stage,
        )
        streak_of(stage).succeeded()
        return
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - isolate the poison message below
        if len(good) == 1:  # nothing to isolate: do not pay for the same failure twice
            await _failed(stage, good[0], handle, dead_letters, policy, exc)
            return
        log.error("batch.failed", stage=stage, size=len(good), error=describe(exc, 500))
    # one by one, each namespace in order and namespaces taking turns (pauses.taking_turns):
    # what succeeded before the failure is redone idempotently
    for p in taking_turns(good, lambda p: tenant_of(p.value)):
        await _handle_one(stage, p, handle, dead_letters, poison_attempts, policy)


async def _handle_one(
    stage: str,
    p: Parsed[T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    attempts: int,
    policy: TransientPolicy,
) -> None:
    try:
        async for attempt_ctx in AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=0.1, max=2),
            retry=retry_if_exception(lambda e: reason_code(e) == PROCESSING),
            reraise=True,
        ):
            with attempt_ctx:
                await retry_transient(
                    lambda: handle([p.value]),
                    what=f"{stage} message",
                    policy=policy,
                    rule=waits_for([p.value]),
                    stage=stage,
                )
        streak_of(stage).succeeded()
        return
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001
        await _failed(stage, p, handle, dead_letters, policy, exc)


async def _failed(
    stage: str,
    p: Parsed[T],
    handle: Callable[[Sequence[T]], Awaitable[Any]],
    dead_letters: DeadLetters,
    policy: TransientPolicy,
    exc: BaseException,
) -> None:
    """A message whose handling failed for good: dead-lettered when it is its own fault.

    Errors our code names (unprocessable, output too large) always are, except a model's
    unusable reply (`UnprocessableReply`), which a broken model gives every message. Any
    other error, and that one, is judged by the stage's streak of it (`pauses.Streak.verdict`): the message's fault until
    `policy.systemic_streak` messages in a row fail with it, or until a programming error
    comes from a second namespace (or from a message naming none); then the stage pauses on
    this message until the error stops (DESIGN §9: a failure of our code, a library or the
    environment pauses the stage instead of draining it into dead letters). A streak whose
    messages all come from one namespace does not pause: one tenant's input must not stop
    the stage for every tenant, so that namespace's messages are dead-lettered with the
    streak named in the reason, and the others keep being served.
    """
    streak = streak_of(stage)
    tenant = tenant_of(p.value)
    while True:
        if reason_code(exc) != PROCESSING and not isinstance(exc, UnprocessableReply):
            await dead_letters.send(p.record, describe(exc), reason_code(exc))
            return
        streak.failed(exc, tenant)
        verdict = streak.verdict(exc, policy.systemic_streak)
        if verdict != PAUSE:
            why = "" if verdict == POISON else _tenant_streak(stage, streak, exc)
            await dead_letters.send(p.record, describe(exc) + why, reason_code(exc))
            return
        log.error(
            "stage.systemic",
            stage=stage,
            streak=streak.count,
            namespaces=len(streak.tenants),
            error=describe(exc, 500),
            effect="the same error for messages of several namespaces in a row: pausing",
        )
        try:
            await retry_transient(
                lambda: handle([p.value]),
                what=f"{stage} message",
                policy=policy,
                stage=stage,
                kind=SYSTEMIC,
                rule=lambda e: waits(e) or streak.matches(e),
            )
            streak.succeeded()
            return
        except asyncio.CancelledError:
            raise
        except Exception as other:  # noqa: BLE001 - another error: judged on its own
            exc = other


def _tenant_streak(stage: str, streak: Streak, exc: BaseException) -> str:
    """Says that a streak of one namespace is dead-lettered; returns the reason's addition."""
    sole, n = streak.sole_tenant(), streak.count
    log.warning(
        "stage.tenant_streak",
        stage=stage,
        namespace=sole,
        streak=n,
        error=describe(exc, 500),
        effect="dead-lettered: every message of the streak is of this namespace",
    )
    return (
        f" (the same error for {n} message{'s' if n > 1 else ''} in a row, all of namespace "
        f"{sole!r}: dead-lettered so that one tenant cannot pause the stage for every tenant; "
        "replay once mended)"
    )
