"""Dead letters made on purpose for the console's tests (issue 27 over issue 24).

- `unparseable`: bytes on `memory.exchanges` that are not JSON; the running segmenter
  dead-letters them (`json`), as it would any such message. Replaying them only fails again,
  so the tests show them, and replay:
- `failed_exchange`: a good exchange dead-lettered by the segmenter's own writer
  (`DeadLetters`) with the reason a stage gives when handling a message failed
  (`processing`), as a segmenter whose handling was broken left it: a replay brings the
  exchange back to `memory.exchanges`, where the running segmenter takes it.
"""

from __future__ import annotations

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


async def failed_exchange(bootstrap: str, ex: Exchange) -> None:
    """`ex` dead-lettered as the segmenter writes it (read at offset 0 of partition 0: it
    was never produced to the source topic)."""
    publisher = KafkaPublisher(bootstrap, idempotence=False)
    await publisher.start()
    try:
        record = Incoming(
            t.EXCHANGES,
            0,
            0,
            ex.key.encode(),
            ex.model_dump_json().encode(),
            (("client-trace", b"console-test"),),
        )
        await DeadLetters(publisher, "segmenter").send(record, FAILED_REASON, PROCESSING)
    finally:
        await publisher.stop()
