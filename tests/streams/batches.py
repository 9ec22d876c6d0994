"""Record batches no client can decode, written as a hostile producer would."""

from __future__ import annotations

import struct

from aiokafka import AIOKafkaProducer
from aiokafka.record.util import calc_crc32c


async def send_damaged(producer: AIOKafkaProducer, topic: str, partition: int, damage: str) -> None:
    """One single-record batch whose CRC does not match ("crc") or whose header key is not
    UTF-8 under a valid CRC ("header_key")."""
    batch = producer.create_batch()
    batch.append(key=b"k", value=b'{"x": 1}', timestamp=None, headers=[("ZZZZ", b"x")])
    buf = bytearray(batch._build())  # noqa: SLF001 - the only way to alter a batch's bytes
    if damage == "crc":
        buf[buf.index(b"x", len(buf) - 2)] ^= 0xFF  # a header value's byte, the CRC kept
    elif damage == "header_key":
        i = buf.index(b"ZZZZ")
        buf[i : i + 4] = b"\xff\xfe\xff\xfe"
        struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    else:
        raise ValueError(f"unknown damage {damage!r}")
    batch._buffer = bytes(buf)  # noqa: SLF001
    await (await producer.send_batch(batch, topic, partition=partition))
