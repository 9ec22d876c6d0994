"""Failures that are not a message's fault pause the stage; only a message's own fault is
dead-lettered (issue 24). The guard is driven directly, dead letters kept in a list."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import REGISTRY

from streams.kafka.guard import Incoming, TransientPolicy, run_guarded
from streams.kafka.pauses import is_programming_error, signature, streak_of, taking_turns
from tests.waiting import eventually
from workers.errors import Unprocessable, UnprocessableReply

FAST = TransientPolicy(max_wait_s=0.02, log_every_s=60.0, base_wait_s=0.005, systemic_streak=3)
RETRIES = 10  # attempts at the same work that show a paused stage waiting, not moving on


class Letters:
    """What `DeadLetters` would have written."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes | None, str]] = []
        self.reasons: list[str] = []

    async def send(self, record: Incoming, reason: str, error_type: str) -> None:
        self.sent.append((record.value, error_type))
        self.reasons.append(reason)


def records(n: int, start: int = 0) -> list[Incoming]:
    return [
        Incoming("memory.segments", 0, i, b"k", f"m{i}".encode()) for i in range(start, start + n)
    ]


def paused_since(stage: str, kind: str, error_type: str) -> float | None:
    return REGISTRY.get_sample_value(
        "lychee_stage_paused_since_seconds",
        {"stage": stage, "kind": kind, "error_type": error_type},
    )


@pytest.fixture(autouse=True)
def fresh_streaks() -> None:
    from streams.kafka import pauses

    pauses._streaks.clear()


def test_programming_errors_are_recognised_through_the_causes_of_wrapping_errors() -> None:
    try:
        try:
            None.encode()  # type: ignore[attr-defined]
        except AttributeError as inner:
            raise RuntimeError("the adapter failed") from inner
    except RuntimeError as outer:
        assert is_programming_error(outer)
    assert is_programming_error(TypeError("x")) and is_programming_error(ImportError("y"))
    assert not is_programming_error(ValueError("bad value")) and not is_programming_error(
        Unprocessable("never")
    )


async def paused_retrying(
    task: asyncio.Task[None], attempts: list[Sequence[bytes]], stage: str, error_type: str
) -> None:
    """Until the stage reports its pause and has tried the same work `RETRIES` times in a
    row (or has ended: the caller's assertions then say what went wrong)."""

    def in_a_row() -> int:
        n = 0
        for work in reversed(attempts):
            if work != attempts[-1]:
                break
            n += 1
        return n

    def retried() -> bool:
        paused = paused_since(stage, "systemic", error_type) is not None
        return task.done() or (paused and in_a_row() >= RETRIES)

    await eventually(retried, what=f"{stage} paused and retrying the same work")


async def test_a_programming_error_for_every_message_pauses_and_dead_letters_nothing() -> None:
    broken = True
    handled: list[bytes] = []
    attempts: list[Sequence[bytes]] = []
    letters = Letters()

    async def handle(values: Sequence[bytes]) -> None:
        attempts.append(values)
        if broken:
            raise AssertionError("a transport that does not fit the SDK")
        handled.extend(values)

    task = asyncio.create_task(
        run_guarded("unit-prog", records(5), lambda r: r.value, handle, letters, policy=FAST)  # type: ignore[arg-type]
    )
    await paused_retrying(task, attempts, "unit-prog", "AssertionError")
    assert not task.done(), "the stage must wait, not move on"
    assert letters.sent == []
    assert paused_since("unit-prog", "systemic", "AssertionError") is not None
    broken = False  # mended
    await asyncio.wait_for(task, 10)
    assert handled == [f"m{i}".encode() for i in range(5)]
    assert letters.sent == []
    assert paused_since("unit-prog", "systemic", "AssertionError") is None


def failing_at_one_place(message: bytes) -> None:
    raise ValueError(f"cannot handle {message!r}")


async def test_the_same_error_for_several_messages_in_a_row_pauses_from_the_streak_on() -> None:
    broken = True
    handled: list[bytes] = []
    attempts: list[Sequence[bytes]] = []
    letters = Letters()

    async def handle(values: Sequence[bytes]) -> None:
        attempts.append(values)
        if broken:
            failing_at_one_place(values[0])
        handled.extend(values)

    async def one_by_one() -> None:  # batches of one, as a slow stage gets them
        for rec in records(5):
            await run_guarded("unit-streak", [rec], lambda r: r.value, handle, letters, policy=FAST)  # type: ignore[arg-type]

    task = asyncio.create_task(one_by_one())
    await paused_retrying(task, attempts, "unit-streak", "ValueError")
    assert not task.done()
    assert attempts[-1] == [b"m2"]  # the pause holds the message that made the streak
    # the first two were judged poison; the third made it a streak of the same error
    assert letters.sent == [(b"m0", "processing"), (b"m1", "processing")]
    assert paused_since("unit-streak", "systemic", "ValueError") is not None
    broken = False
    await asyncio.wait_for(task, 10)
    assert handled == [b"m2", b"m3", b"m4"]
    assert len(letters.sent) == 2


async def test_a_poison_message_between_good_ones_is_dead_lettered_and_nothing_pauses() -> None:
    letters = Letters()
    handled: list[bytes] = []

    async def handle(values: Sequence[bytes]) -> None:
        for v in values:
            if v in (b"m1", b"m3", b"m5"):
                failing_at_one_place(v)
        handled.extend(values)

    for rec in records(7):
        await asyncio.wait_for(
            run_guarded("unit-poison", [rec], lambda r: r.value, handle, letters, policy=FAST),  # type: ignore[arg-type]
            10,
        )
    assert [v for v, _ in letters.sent] == [b"m1", b"m3", b"m5"]
    assert handled == [b"m0", b"m2", b"m4", b"m6"]


async def test_a_message_named_unprocessable_is_dead_lettered_however_many_in_a_row() -> None:
    letters = Letters()

    async def handle(values: Sequence[bytes]) -> None:
        raise Unprocessable("encoder output still invalid after one repair")

    batch = records(6)
    await asyncio.wait_for(
        run_guarded("unit-unproc", batch, lambda r: r.value, handle, letters, policy=FAST),  # type: ignore[arg-type]
        10,
    )
    assert [v for v, _ in letters.sent] == [r.value for r in batch]
    assert {t for _, t in letters.sent} == {"unprocessable"}


async def test_a_failure_of_the_guard_itself_redoes_the_batch_instead_of_dead_lettering() -> None:
    letters = Letters()
    calls = 0

    def parse(rec: Incoming) -> Any:
        return rec.value

    async def handle(values: Sequence[bytes]) -> None:
        nonlocal calls
        calls += 1

    from streams.kafka import guard

    real = guard._run
    failures = 2

    async def broken_run(*args: Any) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise KeyError("a bug in the guard")
        await real(*args)

    guard._run = broken_run  # type: ignore[assignment]
    try:
        await asyncio.wait_for(
            run_guarded("unit-guard", records(2), parse, handle, letters, policy=FAST),  # type: ignore[arg-type]
            10,
        )
    finally:
        guard._run = real  # type: ignore[assignment]
    assert calls == 1 and letters.sent == []


def test_signature_is_the_type_and_the_raising_line() -> None:
    errors = []
    for message in (b"a", b"b"):
        try:
            failing_at_one_place(message)
        except ValueError as exc:
            errors.append(exc)
    assert signature(errors[0]) == signature(errors[1])
    streak = streak_of("unit-signature")
    assert [streak.failed(e) for e in errors] == [1, 2]
    assert streak.failed(ValueError("raised nowhere")) == 1


@dataclass(frozen=True)
class Of:
    """A parsed message of a namespace."""

    namespace: str
    text: bytes


async def test_a_streak_from_one_namespace_dead_letters_it_and_keeps_serving_the_others() -> None:
    letters = Letters()
    handled: list[bytes] = []

    async def handle(values: Sequence[Of]) -> None:
        for v in values:
            if v.namespace == "mallory":
                failing_at_one_place(v.text)
        handled.extend(v.text for v in values)

    tenants = ["mallory"] * 5 + ["alice", "mallory", "bob"]
    batch = [Incoming("memory.segments", 0, i, b"k", b"m%d" % i) for i in range(len(tenants))]
    for rec, ns in zip(batch, tenants, strict=True):
        parse = lambda r, ns=ns: Of(ns, r.value)  # noqa: E731
        await asyncio.wait_for(
            run_guarded("unit-tenant", [rec], parse, handle, letters, policy=FAST),  # type: ignore[arg-type]
            10,
        )
    assert [v for v, _ in letters.sent] == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m6"]
    assert handled == [b"m5", b"m7"]
    assert "all of namespace 'mallory'" in letters.reasons[2]
    assert paused_since("unit-tenant", "systemic", "ValueError") is None


async def one_each(stage: str, namespaces: Sequence[str], handle: Any, letters: Letters) -> None:
    """One message of each namespace in turn through `run_guarded`, each in its own batch."""
    for i, ns in enumerate(namespaces):
        rec = Incoming("memory.segments", 0, i, b"k", b"m%d" % i)
        parse = lambda r, ns=ns: Of(ns, r.value)  # noqa: E731
        await run_guarded(stage, [rec], parse, handle, letters, policy=FAST)  # type: ignore[arg-type]


async def test_a_streak_across_namespaces_still_pauses_the_stage() -> None:
    broken = True
    attempts: list[Sequence[Of]] = []
    letters = Letters()

    async def handle(values: Sequence[Of]) -> None:
        attempts.append(values)
        if broken:
            failing_at_one_place(values[0].text)

    four = ["alice", "bob", "carol", "dave"]
    task = asyncio.create_task(one_each("unit-tenants", four, handle, letters))
    await paused_retrying(task, attempts, "unit-tenants", "ValueError")  # type: ignore[arg-type]
    assert not task.done() and [v for v, _ in letters.sent] == [b"m0", b"m1"]
    assert attempts[-1] == [Of("carol", b"m2")]
    broken = False
    await asyncio.wait_for(task, 10)
    assert len(letters.sent) == 2


def of(tenants: list[str], start: int = 0) -> list[tuple[Incoming, Of]]:
    """Records of the given namespaces, in order, with what each parses to."""
    out = []
    for i, ns in enumerate(tenants, start):
        rec = Incoming("memory.segments", 0, i, b"k", b"m%d" % i)
        out.append((rec, Of(ns, rec.value)))  # type: ignore[arg-type]
    return out


def type_error_at_one_place(value: Of) -> None:
    raise TypeError(f"unsupported operand for {value.text!r}")


async def test_a_programming_error_from_one_namespace_dead_letters_it_and_serves_the_others() -> (
    None
):
    letters = Letters()
    handled: list[bytes] = []

    async def handle(values: Sequence[Of]) -> None:
        for v in values:
            if v.namespace == "mallory":
                type_error_at_one_place(v)
        handled.extend(v.text for v in values)

    async def guarded(batch: list[tuple[Incoming, Of]]) -> None:
        parsed = {rec.offset: value for rec, value in batch}
        recs = [rec for rec, _ in batch]
        await asyncio.wait_for(
            run_guarded(
                "unit-prog-tenant", recs, lambda r: parsed[r.offset], handle, letters, policy=FAST
            ),  # type: ignore[arg-type]
            10,
        )

    await guarded(of(["mallory", "mallory", "mallory", "alice"]))  # one batch
    for one in of(["mallory", "mallory", "bob"], start=4):  # batches of one
        await guarded([one])
    assert [v for v, _ in letters.sent] == [b"m0", b"m1", b"m2", b"m4", b"m5"]
    assert {t for _, t in letters.sent} == {"processing"}
    assert handled == [b"m3", b"m6"]
    assert all("TypeError" in r and "all of namespace 'mallory'" in r for r in letters.reasons)
    assert paused_since("unit-prog-tenant", "systemic", "TypeError") is None


async def test_a_programming_error_from_two_namespaces_pauses_after_dead_lettering_the_first() -> (
    None
):
    broken = True
    handled: list[bytes] = []
    attempts: list[Sequence[Of]] = []
    letters = Letters()

    async def handle(values: Sequence[Of]) -> None:
        attempts.append(values)
        if broken:
            type_error_at_one_place(values[0])
        handled.extend(v.text for v in values)

    batch = of(["alice", "alice", "alice", "bob", "bob"])
    parsed = {rec.offset: value for rec, value in batch}
    task = asyncio.create_task(
        run_guarded(
            "unit-prog-tenants",
            [rec for rec, _ in batch],
            lambda r: parsed[r.offset],
            handle,  # type: ignore[arg-type]
            letters,  # type: ignore[arg-type]
            policy=FAST,
        )
    )
    await paused_retrying(task, attempts, "unit-prog-tenants", "TypeError")  # type: ignore[arg-type]
    assert not task.done(), "a library that fails two tenants' messages pauses the stage"
    # the batch was isolated, namespaces taking turns: alice's first message was judged
    # alone, bob's first confirmed the error as ours, and the pause holds it
    assert attempts[-1] == [Of("bob", b"m3")]
    assert [v for v, _ in letters.sent] == [b"m0"]
    assert "all of namespace 'alice'" in letters.reasons[0]
    broken = False
    await asyncio.wait_for(task, 10)
    assert handled == [b"m3", b"m1", b"m4", b"m2"]
    assert len(letters.sent) == 1
    assert paused_since("unit-prog-tenants", "systemic", "TypeError") is None


def test_taking_turns_keeps_each_namespace_in_order_and_no_namespace_in_place() -> None:
    items = [("a", 0), ("a", 1), ("b", 2), (None, 3), ("b", 4), ("a", 5), ("b", 6)]
    turns = taking_turns(items, lambda item: item[0])
    assert [i for _, i in turns] == [0, 2, 1, 3, 4, 5, 6]


async def test_a_models_unusable_reply_for_several_namespaces_pauses_instead_of_draining() -> None:
    """An LLM that garbles or refuses every request fails every tenant's segments with
    `UnprocessableReply`: the message's fault once, the model's when it goes on across
    namespaces; a plain `Unprocessable` stays each message's own fault."""

    broken = True
    attempts: list[Sequence[Of]] = []
    letters = Letters()

    def garbled(value: Of) -> None:
        raise UnprocessableReply(f"encoder output still invalid for {value.text!r}")

    async def handle(values: Sequence[Of]) -> None:
        attempts.append(values)
        if broken:
            garbled(values[0])

    four = ["alice", "bob", "carol", "dave"]
    task = asyncio.create_task(one_each("unit-model", four, handle, letters))
    await paused_retrying(task, attempts, "unit-model", "UnprocessableReply")  # type: ignore[arg-type]
    assert not task.done() and letters.sent == [(b"m0", "unprocessable"), (b"m1", "unprocessable")]
    broken = False  # the model mended: the stage goes on from the message it paused on
    await asyncio.wait_for(task, 10)
    assert len(letters.sent) == 2

    plain = Letters()

    async def refuse(values: Sequence[Of]) -> None:
        raise Unprocessable("never")

    await asyncio.wait_for(one_each("unit-plain", four, refuse, plain), 10)
    assert len(plain.sent) == 4 and paused_since("unit-plain", "systemic", "Unprocessable") is None


def test_a_message_parsed_with_where_it_was_read_names_its_namespace() -> None:
    """The segmenter and the encoder parse (message, position, headers): the namespace is the
    message's, or one tenant's input would count as a message naming none and pause all."""
    from streams.kafka.pauses import tenant_of

    assert tenant_of((Of("alice", b"m"), None, ())) == "alice"
    assert tenant_of(Of("bob", b"m")) == "bob"
    assert tenant_of(()) is None and tenant_of((b"raw", 1)) is None
