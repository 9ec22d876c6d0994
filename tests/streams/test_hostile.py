"""Hostile input on every input topic of the running stages (`lychee bench fuzz`, small N)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from schemas import topics as t
from streams.bench.fuzz import Generator, format_report, fuzz
from streams.client import MemoryClient
from streams.stack.embedded import Stack
from tests.streams.batches import send_damaged

pytestmark = pytest.mark.integration


async def test_fuzz_every_bad_message_accounted_for_nothing_good_lost_stages_alive(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    import random

    kinds = len(Generator("x", 4, 1, random.Random(0)).kinds())
    report = await fuzz(settings, kinds + 4, lambda: {c.name: c.alive for c in stack.children})
    text = format_report(report)
    assert report.lost == 0, text
    assert report.mismatched == [], text
    assert "NO" not in report.stages_alive, text
    assert (
        report.good_indexed == report.good_exchanges and report.good_answered == report.good_queries
    )
    assert report.dead_without_reason == 0
    # every way of being bad was exercised, and each has its own reason code
    assert len(report.bad_by_kind) >= kinds - 2  # `.first` halves are not counted as bad
    assert {
        "json",
        "schema",
        "schema_version",
        "null_value",
        "empty",
        "encoding",
        "too_large",
        "too_deep",
        "undecodable",
        "reply_partition",
    } <= set(report.dead_by_reason)
    assert report.error_replies >= 5 and report.dropped >= 1


@pytest.mark.parametrize("damage", ["crc", "header_key"])
async def test_a_batch_no_client_can_decode_on_a_reply_partition_does_not_stop_the_client(
    stack: Stack, settings, damage: str, unguarded: None
) -> None:  # type: ignore[no-untyped-def]
    async with MemoryClient(settings) as client:
        producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
        await producer.start()
        try:
            await send_damaged(producer, t.REPLIES, client.reply_partition, damage)
        finally:
            await producer.stop()
        reply = await client.search("hostile-replies", "what did Ann book?", k=3, timeout_s=60)
    assert reply.status == "ok"
