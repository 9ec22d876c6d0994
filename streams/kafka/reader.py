"""Read a topic from the beginning up to its current end (for inspection, dead letters and
benchmarks)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import ConsumerRecord

from streams.kafka import fetch
from streams.kafka.lag import LagReader, stop_consumer

Record = tuple[bytes | None, bytes | None, dict[str, bytes]]


@dataclass(frozen=True)
class Stored:
    """One record where it is stored, headers in order (a name may repeat)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


async def read_stored(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Stored]:
    """Every record of `topic` up to the end offsets read at the start, in partition order.

    A batch no client can unpack (a wrong CRC, a header key that is not UTF-8: what a hostile
    client can store) is left out, as the stages leave it out (`streams.kafka.fetch`), so
    one bad batch does not hide the rest of the topic."""
    fetch.install([topic])
    async with LagReader(bootstrap) as lag:
        ends = await lag.end_offsets(topic)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    out: list[Stored] = []
    try:
        consumer.assign(list(ends))
        for tp in ends:
            consumer.seek(tp, 0)
        remaining = {tp for tp, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            for tp, recs in (await consumer.getmany(timeout_ms=500)).items():
                out.extend(
                    Stored(tp.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                    for r in recs
                    if not _undecodable(topic, r) and r.offset < ends[tp]  # every marker taken
                )
                if recs and recs[-1].offset + 1 >= ends[tp]:
                    remaining.discard(tp)
        if remaining:
            raise TimeoutError(f"{topic}: could not read to the end within {timeout_s}s")
    finally:
        await stop_consumer(consumer)
    return sorted(out, key=lambda r: (r.partition, r.offset))


def _undecodable(topic: str, r: ConsumerRecord[bytes, bytes]) -> bool:
    """Whether `r` is the marker `streams.kafka.fetch` left for a batch it could not unpack."""
    return r.value is None and fetch.take_undecodable(topic, r.partition, r.offset) is not None


async def read_topic(
    bootstrap: str,
    topic: str,
    key_prefix: str | None = None,
    timeout_s: float = 60.0,
    *,
    key: str | None = None,
) -> list[Record]:
    """Every record up to the end offsets read at the start, keys filtered by prefix, or
    equal to `key` (`memory.records` is keyed by the bare namespace, which is a prefix of
    other namespaces' keys)."""
    out: list[Record] = []
    for r in await read_stored(bootstrap, topic, timeout_s):
        text = (r.key or b"").decode(errors="replace")
        if (key_prefix is None or text.startswith(key_prefix)) and (key is None or text == key):
            out.append((r.key, r.value, dict(r.headers)))
    return out
