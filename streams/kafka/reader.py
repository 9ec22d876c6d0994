"""Read a topic from the beginning up to its current end (for inspection and benchmarks)."""

from __future__ import annotations

import time

from aiokafka import AIOKafkaConsumer

from streams.kafka.lag import LagReader, stop_consumer

Record = tuple[bytes | None, bytes | None, dict[str, bytes]]


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
    async with LagReader(bootstrap) as lag:
        ends = await lag.end_offsets(topic)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    out: list[Record] = []
    try:
        consumer.assign(list(ends))
        for tp in ends:
            consumer.seek(tp, 0)
        remaining = {tp for tp, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            for tp, recs in (await consumer.getmany(timeout_ms=500)).items():
                for r in recs:
                    text = (r.key or b"").decode()
                    wanted = (key_prefix is None or text.startswith(key_prefix)) and (
                        key is None or text == key
                    )
                    if r.offset < ends[tp] and wanted:
                        out.append((r.key, r.value, dict(r.headers)))
                if recs and recs[-1].offset + 1 >= ends[tp]:
                    remaining.discard(tp)
        if remaining:
            raise TimeoutError(f"{topic}: could not read to the end within {timeout_s}s")
    finally:
        await stop_consumer(consumer)
    return out
