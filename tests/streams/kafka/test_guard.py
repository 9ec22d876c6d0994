"""The guard between agent loops and exceptions: the retry rule, pauses, dead letters.

The rule and the pause are unit-tested; dead letters go to the real broker of the test
stack (aiokafka's own refusals are what is being guarded against).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
import structlog
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NodeNotReadyError,
    UnknownError,
)
from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError

from schemas import topics as t
from streams.kafka.errors import PublisherStopped
from streams.kafka.guard import (
    DeadLetters,
    Incoming,
    TransientPolicy,
    retry_transient,
)
from streams.kafka.guard import run_guarded as guarded
from streams.kafka.producer import KafkaPublisher
from streams.kafka.reader import read_topic
from streams.kafka.rules import is_transient
from tests.waiting import eventually
from workers.errors import Refused, TemporarilyUnavailable, Unprocessable

FAST = TransientPolicy(max_wait_s=0.02, log_every_s=60.0, base_wait_s=0.005)


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (KafkaTimeoutError(), True),  # retriable=False in aiokafka, but a slow broker
        (NodeNotReadyError(), True),
        (KafkaConnectionError(), True),
        (MessageSizeTooLargeError(), False),
        (UnknownError(), False),
        (PublisherStopped("x"), True),
        (TemporarilyUnavailable("llm down", 3.0), True),
        (Refused("401"), True),
        (OutOfMemoryError("maxmemory"), True),
        (ReadOnlyError("replica"), True),
        (ResponseError("WRONGTYPE"), False),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (ValueError("bad"), False),
        (TypeError("unhashable"), False),
        (Unprocessable("never"), False),
    ],
)
def test_is_transient_classifies_by_the_named_rule(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


async def test_retry_transient_refused_logs_one_line_per_interval_and_resumes() -> None:
    calls = 0

    async def refused_then_ok() -> str:
        nonlocal calls
        calls += 1
        if calls < 40:
            raise Refused("HTTP 401", hint="check LYCHEE_LLM_API_KEY")
        return "ok"

    policy = TransientPolicy(max_wait_s=0.03, log_every_s=0.4, base_wait_s=0.03)
    with structlog.testing.capture_logs() as logs:
        assert await retry_transient(refused_then_ok, "encoder batch", policy) == "ok"
    paused = [e for e in logs if e["event"] == "stage.paused"]
    assert calls == 40
    assert 1 <= len(paused) <= 6  # about one per 0.4 s over ~1 s of 39 failures
    assert paused[0]["hint"] == "check LYCHEE_LLM_API_KEY" and paused[0]["log_level"] == "error"
    assert [e["event"] for e in logs][-1] == "stage.resumed"


async def test_retry_transient_pause_line_shows_how_fast_the_llm_was_writing() -> None:
    calls = 0

    async def slow_then_ok() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TemporarilyUnavailable("LLM unavailable: timed out", tokens_per_s=3.14159)
        return "ok"

    policy = TransientPolicy(max_wait_s=0.01, log_every_s=60, base_wait_s=0.01)
    with structlog.testing.capture_logs() as logs:
        assert await retry_transient(slow_then_ok, "encoder batch", policy) == "ok"
    (paused,) = [e for e in logs if e["event"] == "stage.paused"]
    assert paused["llm_tokens_per_s"] == 3.14  # slow, not down


class _Refusing:
    """A publisher whose every send fails for good (what a broken broker would do)."""

    max_request_bytes = 1_048_576

    def __init__(self) -> None:
        self.attempts = 0

    async def send_raw(self, *args: object, **kwargs: object) -> None:
        self.attempts += 1
        raise AssertionError("Need at least one: key or value")


async def test_dead_letters_send_never_raises_when_every_send_fails() -> None:
    publisher = _Refusing()
    rec = Incoming("memory.exchanges", 0, 7, None, None)
    await DeadLetters(publisher, "segmenter", FAST).send(rec, "null value", "null_value")
    assert publisher.attempts == 2  # the record, then its metadata only; then it gives up


# -- against the real broker ----------------------------------------------------------------


@pytest.fixture
async def publisher(stack):  # type: ignore[no-untyped-def]
    pub = KafkaPublisher(stack.bootstrap, idempotence=False, max_request_bytes=1_048_576)
    await pub.start()
    yield pub
    await pub.stop()


def incoming(value: bytes | None, key: bytes | None, topic: str = t.EXCHANGES) -> Incoming:
    # an offset of its own far past any message the shared stack holds
    return Incoming(topic, 0, (1 << 60) + uuid.uuid4().int % (1 << 30), key, value)


async def dlq_of(stack, offset: int, topic: str = t.EXCHANGES) -> list[tuple]:  # type: ignore[no-untyped-def, type-arg]
    dead = await read_topic(stack.bootstrap, t.dlq(topic))
    return [d for d in dead if d[2].get("source_offset") == str(offset).encode()]


@pytest.mark.integration
async def test_dead_letter_of_null_key_and_null_value_is_sent_with_a_null_marker(
    stack, publisher
) -> None:  # type: ignore[no-untyped-def]
    rec = incoming(None, None)
    await DeadLetters(publisher, "segmenter", FAST).send(
        rec, "the message value is null", "null_value"
    )
    [(key, value, headers)] = await dlq_of(stack, rec.offset)
    assert key is None and value == b"" and headers["value_null"] == b"1"
    assert (
        headers["error_type"] == b"null_value" and headers["error"] == b"the message value is null"
    )


@pytest.mark.integration
async def test_dead_letter_too_large_to_copy_goes_as_metadata(stack, publisher) -> None:  # type: ignore[no-untyped-def]
    big = b"x" * 3_000_000  # over this publisher's 1 MiB request limit
    rec = incoming(big, b"k")
    await asyncio.wait_for(
        DeadLetters(publisher, "segmenter", FAST).send(rec, "too big", "too_large"), 30
    )
    [(key, value, headers)] = await dlq_of(stack, rec.offset)
    assert value == b"" and key == b"k" and headers["value_dropped"] == b"1"
    assert headers["value_size"] == b"3000000" and len(headers["value_sha256"]) == 64


@pytest.mark.integration
async def test_run_guarded_parse_raising_anything_dead_letters_and_handles_the_rest(
    stack, publisher
) -> None:  # type: ignore[no-untyped-def]
    bad, good = incoming(b'{"kind": []}', b"k1"), incoming(b"{}", b"k2")
    handled: list[bytes] = []

    def parse(rec: Incoming) -> bytes:
        if rec is bad:
            raise TypeError("unhashable type: 'list'")
        return rec.value or b""

    async def handle(values: Sequence[bytes]) -> None:
        handled.extend(values)

    await guarded(
        "segmenter",
        [bad, good],
        parse,
        handle,
        DeadLetters(publisher, "segmenter", FAST),
        policy=FAST,
    )
    assert handled == [b"{}"]
    [(_, value, headers)] = await dlq_of(stack, bad.offset)
    assert value == b'{"kind": []}' and b"TypeError" in headers["error"]


@pytest.mark.integration
async def test_run_guarded_temporarily_unavailable_waits_and_never_dead_letters(
    stack, publisher
) -> None:  # type: ignore[no-untyped-def]
    recs = [incoming(b"a", b"k"), incoming(b"b", b"k")]
    failures = 12  # more than the poison attempts: an outage is not the message's fault

    async def handle(values: Sequence[bytes]) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise TemporarilyUnavailable("LLM unavailable after 5 attempt(s): HTTP 503", 0.01)

    await guarded(
        "encoder",
        recs,
        lambda r: r.value,
        handle,
        DeadLetters(publisher, "encoder", FAST),
        policy=FAST,
    )
    assert failures == 0
    for rec in recs:
        assert await dlq_of(stack, rec.offset) == []


@pytest.mark.integration
async def test_run_guarded_output_over_the_size_limit_dead_letters_the_input(
    stack, publisher
) -> None:  # type: ignore[no-untyped-def]
    from workers.ports import OutMessage

    rec = incoming(b"small input, huge output", b"k")

    async def handle(values: Sequence[bytes]) -> None:  # a real publish over the 1 MiB limit
        await publisher.publish([OutMessage(t.TURNS, "k", b"y" * 2_000_000)])

    dead = DeadLetters(publisher, "segmenter", FAST)
    await asyncio.wait_for(
        guarded("segmenter", [rec], lambda r: r.value, handle, dead, policy=FAST), 30
    )
    [(_, value, headers)] = await dlq_of(stack, rec.offset)
    assert value == b"small input, huge output"
    assert (
        headers["error_type"] == b"output_too_large"
        and b"MessageSizeTooLargeError" in headers["error"]
    )


@pytest.mark.integration
async def test_run_guarded_redis_out_of_memory_pauses_until_memory_is_freed(
    tmp_path, stack, publisher
) -> None:  # type: ignore[no-untyped-def]
    from redis.asyncio import Redis

    from streams.stack.embedded import Child, free_port, redis_binary, wait_port

    port = free_port()
    child = Child(
        "redis-oom",
        [
            redis_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
            "--maxmemory",
            "2mb",
            "--maxmemory-policy",
            "noeviction",
        ],
    )
    child.start()
    redis = Redis(port=port)
    try:
        wait_port(port, 20, child.proc)
        for i in range(40):  # fill it past maxmemory
            try:
                await redis.set(f"fill{i}", b"z" * 100_000)
            except OutOfMemoryError:
                break
        rec = incoming(b"state", b"k")
        attempts = 0

        async def handle(values: Sequence[bytes]) -> None:
            nonlocal attempts
            attempts += 1
            await redis.set("state", b"s" * 10_000)

        async def free_later() -> None:  # once the stage has been refused a few times
            await eventually(lambda: attempts > 3, what="the write refused more than 3 times")
            await redis.config_set("maxmemory", "0")

        freeing = asyncio.create_task(free_later())
        await asyncio.wait_for(
            guarded(
                "segmenter",
                [rec],
                lambda r: r.value,
                handle,
                DeadLetters(publisher, "segmenter", FAST),
                policy=FAST,
            ),
            30,
        )
        await freeing
        assert attempts > 3 and await redis.get("state") == b"s" * 10_000
        assert await dlq_of(stack, rec.offset) == []
    finally:
        await redis.aclose()
        child.stop()
