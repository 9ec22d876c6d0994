"""The lag reader against a real broker: end offsets whatever the topic holds."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.kafka.lag import LagReader
from streams.stack.embedded import Stack
from tests.streams.batches import send_damaged

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("damage", ["crc", "header_key"])
async def test_end_offsets_read_past_a_batch_no_client_can_decode(
    stack: Stack, damage: str, unguarded: None
) -> None:
    """A batch whose CRC does not match, or whose header key is not UTF-8 (a client we did not
    write, a hostile one), sits where the reader's probe fetches: the high watermark is still
    read (the fuzz benchmark found both)."""
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        await send_damaged(producer, topic, 0, damage)
        await producer.send_and_wait(topic, b'{"x": 2}', key=b"k", partition=0)
    finally:
        await producer.stop()
    async with LagReader(stack.bootstrap) as lag:
        ends = await lag.end_offsets(topic, timeout_s=60)
    assert list(ends.values()) == [2]
