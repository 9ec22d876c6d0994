"""Record batches no client can decode: a dead letter's marker instead of a dead fetcher."""

from __future__ import annotations

import struct
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.record.util import calc_crc32c

from streams.kafka import fetch
from streams.kafka.errors import CodecsMissing
from streams.stack.embedded import Stack
from tests.streams.batches import send_damaged
from tests.waiting import eventually


def test_check_codecs_missing_codec_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka import codec

    fetch.check_codecs()  # this environment has them all
    monkeypatch.setattr(codec, "has_zstd", lambda: False)
    with pytest.raises(CodecsMissing, match=r"zstd-compressed .*aiokafka\[lz4,snappy,zstd\]"):
        fetch.check_codecs()


async def _produce(bootstrap: str, topic: str) -> None:
    """good, bad header key, good, bad CRC, good (single-record batches); then a batch of
    three whose middle record cannot be read, and a good record."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        for i, damage in enumerate([None, "header_key", None, "crc", None]):
            if damage is None:
                await p.send_and_wait(topic, f"good{i}".encode(), partition=0)
            else:
                await send_damaged(p, topic, 0, damage)
        # offsets 5-7 in one batch, the middle record's header key not UTF-8; then a good one
        batch = p.create_batch()
        for i, name in enumerate(("AAAA", "ZZZZ", "AAAA")):
            batch.append(key=b"k", value=f"m{i}".encode(), timestamp=None, headers=[(name, b"x")])
        buf = bytearray(batch._build())
        j = buf.index(b"ZZZZ")
        buf[j : j + 4] = b"\xff\xfe\xff\xfe"
        struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
        batch._buffer = bytes(buf)
        await (await p.send_batch(batch, topic, partition=0))
        await p.send_and_wait(topic, b"good8", partition=0)
    finally:
        await p.stop()


async def _read(bootstrap: str, topic: str, n: int) -> list[tuple[int, bytes | None]]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    tp = TopicPartition(topic, 0)
    out: list[tuple[int, bytes | None]] = []

    async def fetched() -> list[tuple[int, bytes | None]]:
        for r in (await c.getmany(tp, timeout_ms=1000)).get(tp, []):
            out.append((r.offset, r.value))
        return out

    try:
        c.assign([tp])
        c.seek(tp, 0)
        return await eventually(
            fetched,
            what=f"{n} records of {topic}",
            until=lambda got: len(got) >= n,
            timeout_s=20,
            interval_s=0,
        )
    finally:
        await c.stop()


@pytest.mark.integration
async def test_fetch_undecodable_batches_become_markers_and_good_records_all_arrive(
    stack: Stack, unguarded: None
) -> None:
    topic = f"poison-{uuid.uuid4().hex[:6]}"
    await _produce(stack.bootstrap, topic)
    with pytest.raises(UnicodeDecodeError):  # what aiokafka (and so Faust's fetcher) does alone
        await _read(stack.bootstrap, topic, 9)
    fetch.install(["another-topic"])  # a client's scope: the other topics are left alone
    with pytest.raises(UnicodeDecodeError):
        await _read(stack.bootstrap, topic, 9)
    fetch.install()
    got = await _read(stack.bootstrap, topic, 9)
    assert got == [
        (0, b"good0"),
        (1, None),
        (2, b"good2"),
        (3, None),
        (4, b"good4"),
        (5, b"m0"),
        (6, None),
        (7, None),
        (8, b"good8"),
    ]
    # contiguous offsets (Faust commits past them); the first marker carries the reason
    middle = fetch.take_undecodable(topic, 0, 6)
    assert middle is not None and "offsets 6..7" in middle
    assert fetch.take_undecodable(topic, 0, 7) == fetch.COVERED
    header = fetch.take_undecodable(topic, 0, 1)
    crc = fetch.take_undecodable(topic, 0, 3)
    assert header is not None and "UnicodeDecodeError" in header and "offsets 1..1" in header
    assert crc is not None and "Invalid CRC" in crc
    assert fetch.take_undecodable(topic, 0, 2) is None


def test_pyproject_declares_the_codec_extras_and_librdkafka_for_tests() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("aiokafka[lz4,snappy,zstd]") for d in project["dependencies"])
    assert any(d.startswith("confluent-kafka") for d in project["optional-dependencies"]["dev"])
