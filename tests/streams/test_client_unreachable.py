"""A client library caller with no broker where the settings say gets the library's own
error naming the address, as the CLI's one line does; a wait on Redis that does not get
its answer ends at its deadline."""

from __future__ import annotations

import asyncio

import pytest

from streams.client import MemoryClient, SyncMemoryClient
from streams.errors import BrokerUnreachable
from streams.progress import Progress
from streams.settings import Settings
from streams.stack.embedded import free_port


def nowhere() -> tuple[Settings, str]:
    at = f"127.0.0.1:{free_port()}"
    return Settings().replaced(kafka={"bootstrap": at, "request_timeout_s": 5.0}), at


async def test_the_async_client_names_the_broker_it_could_not_reach() -> None:
    settings, at = nowhere()
    with pytest.raises(BrokerUnreachable) as raised:
        async with MemoryClient(settings):
            pass
    assert str(raised.value).startswith(f"cannot reach Kafka at {at} (no broker answers)")
    assert isinstance(raised.value, ConnectionError)


def test_the_sync_client_names_it_too() -> None:
    settings, at = nowhere()
    with pytest.raises(BrokerUnreachable, match=f"at {at} "):
        SyncMemoryClient(settings)


def test_a_reply_timeout_names_a_short_wait_as_given() -> None:
    from streams.errors import ReplyTimeout

    assert str(ReplyTimeout("q1", 0.001)) == "no reply to q1 within 0.001s"
    assert str(ReplyTimeout("q1", 15.0)) == "no reply to q1 within 15s"


async def test_wait_indexed_ends_at_its_deadline_when_a_read_swallows_its_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Redis read may swallow the cancellation a timeout sends (redis/redis-py#2028):
    the wait still ends at its deadline, with its own error."""
    swallowed = []

    async def indexed(self: Progress, namespace: str, sessions: list[str]) -> dict[str, int]:
        if not swallowed:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                swallowed.append(True)  # and not raised again, as that read did
        return {}

    monkeypatch.setattr(Progress, "indexed", indexed)
    wait = MemoryClient(Settings()).wait_indexed("ns", "s0", 3, timeout_s=0.2)
    with pytest.raises(TimeoutError, match="ns/s0 not indexed up to seq 3 within 0.2 s"):
        await asyncio.wait_for(wait, 10)
    assert swallowed
