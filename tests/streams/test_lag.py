"""The lag reader against a real broker: end offsets whatever the topic holds."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.lag import LagReader
from streams.stack.embedded import Stack

pytestmark = pytest.mark.integration


async def test_end_offsets_read_past_a_batch_with_a_bad_crc(stack: Stack) -> None:
    """A batch whose CRC does not match (a client we did not write, a hostile one) sits where
    the reader's probe fetches: the high watermark is still read (the fuzz test found it)."""
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
        batch = producer.create_batch()
        batch.append(key=b"k", value=b'{"x": 1}', timestamp=None)
        buf = bytearray(batch._build())  # noqa: SLF001 - the only way to alter a batch's bytes
        buf[-3] ^= 0xFF  # the value's bytes change, the CRC does not
        batch._buffer = bytes(buf)  # noqa: SLF001
        await (await producer.send_batch(batch, topic, partition=0))
        await producer.send_and_wait(topic, b'{"x": 2}', key=b"k", partition=0)
    finally:
        await producer.stop()
    async with LagReader(stack.bootstrap) as lag:
        ends = await lag.end_offsets(topic, timeout_s=60)
    assert list(ends.values()) == [2]
