"""`read_topic` on a real broker: key filters, and batches no client can unpack."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from schemas import topics as t
from streams.kafka.reader import read_topic
from streams.stack.embedded import Stack
from tests.streams.batches import send_damaged

pytestmark = pytest.mark.integration


async def test_read_topic_by_exact_key_leaves_out_keys_it_prefixes(stack: Stack) -> None:
    ns = f"rd-{uuid.uuid4().hex[:6]}"
    topic = t.dlq(t.RECORDS)  # exists, and nothing consumes it
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        for key in (ns, f"{ns}-other", f"{ns}/s1", ns):
            await producer.send_and_wait(topic, key.encode(), key=key.encode())
    finally:
        await producer.stop()
    exact = await read_topic(stack.bootstrap, topic, key=ns)
    assert [v for _, v, _ in exact] == [ns.encode(), ns.encode()]
    prefixed = await read_topic(stack.bootstrap, topic, ns)
    assert sorted(v for _, v, _ in prefixed) == sorted(
        k.encode() for k in (ns, f"{ns}-other", f"{ns}/s1", ns)
    )


@pytest.mark.parametrize("damage", ["crc", "header_key"])
async def test_read_topic_leaves_out_a_batch_no_client_can_unpack(
    stack: Stack, damage: str
) -> None:
    # what a hostile client can store: the records around it are still read
    key = f"rd-{uuid.uuid4().hex[:6]}".encode()
    topic = t.dlq(t.SEGMENTS)  # exists, and nothing consumes it
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"before", key=key, partition=0)
        await send_damaged(producer, topic, 0, damage)
        await producer.send_and_wait(topic, b"after", key=key, partition=0)
    finally:
        await producer.stop()
    got = await read_topic(stack.bootstrap, topic, key=key.decode())
    assert [v for _, v, _ in got] == [b"before", b"after"]
