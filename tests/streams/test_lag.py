"""The lag reader against a real broker: end offsets whatever the topic holds."""

from __future__ import annotations

import struct
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.record.util import calc_crc32c

from streams.lag import LagReader
from streams.stack.embedded import Stack

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("damage", ["crc", "header_key"])
async def test_end_offsets_read_past_a_batch_no_client_can_decode(
    stack: Stack, damage: str
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
        batch = producer.create_batch()
        batch.append(key=b"k", value=b'{"x": 1}', timestamp=None, headers=[("ZZZZ", b"x")])
        buf = bytearray(batch._build())  # noqa: SLF001 - the only way to alter a batch's bytes
        if damage == "crc":
            buf[buf.index(b"x", len(buf) - 2)] ^= 0xFF  # a header value's byte, the CRC kept
        else:
            i = buf.index(b"ZZZZ")
            buf[i : i + 4] = b"\xff\xfe\xff\xfe"  # not UTF-8, with a valid CRC
            struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
        batch._buffer = bytes(buf)  # noqa: SLF001
        await (await producer.send_batch(batch, topic, partition=0))
        await producer.send_and_wait(topic, b'{"x": 2}', key=b"k", partition=0)
    finally:
        await producer.stop()
    async with LagReader(stack.bootstrap) as lag:
        ends = await lag.end_offsets(topic, timeout_s=60)
    assert list(ends.values()) == [2]
