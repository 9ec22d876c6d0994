"""Producers against a broker that gives no producer id (Tansu 0.6 to aiokafka's v0 request)."""

from __future__ import annotations

import logging
import uuid

import pytest
import structlog
from aiokafka.errors import KafkaConnectionError

from schemas import Exchange, Role, Turn
from streams.client import MemoryClient
from streams.kafka import producer as prod
from streams.settings import Settings
from streams.stack.embedded import Stack, free_port

pytestmark = pytest.mark.integration


async def test_start_producer_without_producer_ids_falls_back_with_one_warning(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(prod, "_NO_PRODUCER_ID", set())
    caplog.set_level(logging.DEBUG, logger="aiokafka")
    with structlog.testing.capture_logs() as logs:
        first = await prod.start_producer(stack.bootstrap, idempotence=True)
        second = await prod.start_producer(stack.bootstrap, idempotence=True)
    try:
        for p in (first, second):
            await p.send_and_wait("memory.control", b"ping")
            assert (
                p._txn_manager is None
            )  # plain producers (aiokafka keeps none without idempotence)
    finally:
        await first.stop()
        await second.stop()
    warnings = [e for e in logs if e["event"] == "producer.idempotence_off"]
    assert len(warnings) == 1 and "no producer id" in warnings[0]["reason"]
    assert not [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and "InitProducerId" in r.getMessage()
    ]


async def test_start_producer_unreachable_broker_raises_and_is_not_taken_for_a_capability(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prod, "_NO_PRODUCER_ID", set())
    nowhere = f"127.0.0.1:{free_port()}"
    with pytest.raises(KafkaConnectionError):
        await prod.start_producer(nowhere, idempotence=True, timeout_s=5)
    assert nowhere not in prod._NO_PRODUCER_ID


async def test_memory_client_default_idempotence_works_against_the_embedded_broker(
    stack: Stack,
) -> None:
    settings = Settings.load(
        None,
        kafka={"bootstrap": stack.bootstrap, "topic_partitions": 4},
        redis={"url": stack.redis_url},
        store={"uri": stack.lancedb_uri},
    )
    assert settings.kafka.idempotence  # the default, as a user without exports has it
    ns = f"idem-{uuid.uuid4().hex[:6]}"
    ex = Exchange(
        namespace=ns,
        session_id="s",
        seq=0,
        exchange_id="e",
        turns=[Turn(role=Role.user, content="hello")],
    )
    async with MemoryClient(settings) as client:
        assert await client.add([ex]) == 1
