"""A fetch answered with a batch past the position (Tansu: a produce's offsets reserved, its
batch not stored yet, the next producer's batch stored) must not move the position past it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from streams.kafka import fetch


def _batch(base: int, n: int) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=None, key=b"k", value=f"v{base + i}".encode(), headers=[])
    buf = bytearray(b.build())
    buf[0:8] = base.to_bytes(8, "big")  # the broker sets the base offset
    return bytes(buf)


def _unpack(position: int, *batches: bytes) -> tuple[list[int], int]:
    pr = PartitionRecords(
        TopicPartition("t", 0), MemoryRecords(b"".join(batches)), [], position, None, None, True, 0
    )
    return [r.offset for r in pr], pr.next_fetch_offset


@pytest.fixture
def installed() -> Iterator[None]:
    fetch.install()
    yield
    fetch.uninstall()


def test_fetch_batch_past_the_position_is_fetched_again_not_skipped(installed: None) -> None:
    # offsets 3..5 reserved but not stored: the answer to a fetch at 3 is the batch at 6
    assert _unpack(3, _batch(6, 3)) == ([], 3)
    # the records before a hole are delivered, the position stops at it
    assert _unpack(0, _batch(0, 3), _batch(6, 3)) == ([0, 1, 2], 3)
    # once stored, everything arrives in order
    assert _unpack(3, _batch(3, 3), _batch(6, 3)) == ([3, 4, 5, 6, 7, 8], 9)
    # a fetch inside a batch still gets the batch whole and skips below the position
    assert _unpack(4, _batch(3, 3)) == ([4, 5], 6)


def test_fetch_hole_open_past_the_grace_is_taken_as_a_gap(
    installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch, "HOLE_GRACE_S", 0.0)
    assert _unpack(3, _batch(6, 3)) == ([6, 7, 8], 9)
