"""Dead letters made on purpose for the console's tests (issue 27 over issue 24).

- `unparseable`: bytes on `memory.exchanges` that are not JSON; the running segmenter
  dead-letters them (`json`), as it would any such message. Replaying them only fails again,
  so the tests show them, and replay:
- `failed_exchange`: a good exchange dead-lettered by the segmenter's own writer
  (`DeadLetters`) with the reason a stage gives when handling a message failed
  (`processing`), as a segmenter whose handling was broken left it: a replay brings the
  exchange back to `memory.exchanges`, where the running segmenter takes it.
- `misdirected`: a letter whose headers name another topic than its dead-letter topic
  serves, which a replay never writes to.
"""

from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaProducer

from schemas import Exchange, Turn
from schemas import topics as t
from streams.kafka.guard import PROCESSING, DeadLetters, Incoming
from streams.kafka.producer import KafkaPublisher

# not JSON, and markup a page must show as text
UNPARSEABLE_TEXT = '{"kind": "exchange", "turns": [<img src=x onerror="window.__pwned=1">oops'
FAILED_REASON = "RuntimeError: the segmenter's handling failed (made by the test)"


async def unparseable(bootstrap: str, namespace: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            t.EXCHANGES, UNPARSEABLE_TEXT.encode(), key=f"{namespace}/s1".encode()
        )
    finally:
        await producer.stop()


def exchange(namespace: str, session_id: str, content: str) -> Exchange:
    return Exchange(
        namespace=namespace,
        session_id=session_id,
        seq=0,
        exchange_id=f"{session_id}-replayed",
        turns=[Turn(role="user", speaker="Robin", content=content)],
    )


async def failed_exchange(
    bootstrap: str, ex: Exchange, partition: int = 0, offset: int | None = None
) -> None:
    """`ex` dead-lettered as the segmenter writes it, as read at `offset` of `partition`
    (by default an offset of its own far past any message: it was never produced to the
    source topic, and a letter naming a real position reads as that message's outcome)."""
    if offset is None:
        offset = (1 << 60) + uuid.uuid4().int % (1 << 30)
    publisher = KafkaPublisher(bootstrap, idempotence=False)
    await publisher.start()
    try:
        record = Incoming(
            t.EXCHANGES,
            partition,
            offset,
            ex.key.encode(),
            ex.model_dump_json().encode(),
            (("client-trace", b"console-test"),),
        )
        await DeadLetters(publisher, "segmenter").send(record, FAILED_REASON, PROCESSING)
    finally:
        await publisher.stop()


async def misdirected(bootstrap: str, ex: Exchange, named: str) -> None:
    """`ex` written straight to the exchanges' dead-letter topic by whoever can produce
    there, its headers naming `named` as the source a replay should write to."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    headers = {
        "error": FAILED_REASON,
        "error_type": PROCESSING,
        "stage": "segmenter",
        "source_topic": named,
        "source_partition": "0",
        "source_offset": "0",
        "failed_at_ms": str(int(time.time() * 1000)),
    }
    try:
        await producer.send_and_wait(
            t.dlq(t.EXCHANGES),
            ex.model_dump_json().encode(),
            key=ex.key.encode(),
            headers=[(k, v.encode()) for k, v in headers.items()],
        )
    finally:
        await producer.stop()
