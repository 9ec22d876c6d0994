"""The shared wait: it returns what it waited for, or fails naming it and the last value."""

from __future__ import annotations

import pytest

from tests.waiting import eventually, wait_until


def test_wait_until_returns_the_first_value_that_holds() -> None:
    seen = iter(range(10))
    assert wait_until(lambda: next(seen), what="three", until=lambda n: n >= 3) == 3


def test_wait_until_fails_naming_what_it_waited_for_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"for the answer; last seen: \[41\]"):
        wait_until(lambda: [41], what="the answer", until=lambda v: v == [42], timeout_s=0.05)


def test_wait_until_ends_at_once_when_the_probe_raises() -> None:
    def dead() -> bool:
        raise RuntimeError("the worker died")

    with pytest.raises(RuntimeError, match="died"):
        wait_until(dead, what="a worker", timeout_s=60)


async def test_eventually_awaits_a_coroutine_probe_and_takes_a_plain_one() -> None:
    calls: list[int] = []

    async def rows() -> list[int]:
        calls.append(1)
        return list(calls)

    assert await eventually(rows, what="two rows", until=lambda r: len(r) == 2) == [1, 1]
    assert await eventually(lambda: "ready", what="a plain value") == "ready"
    with pytest.raises(AssertionError, match="waited 0.05 s for nothing; last seen: ''"):
        await eventually(lambda: "", what="nothing", timeout_s=0.05)
