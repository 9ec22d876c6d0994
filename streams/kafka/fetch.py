"""Record batches a worker cannot decode, caught below the agent (poison pills on the wire).

A batch with a codec the worker lacks, a wrong CRC, or a header key that is not UTF-8 is
stored by the broker as it is; aiokafka then raises while unpacking it, inside Faust's
fetcher, before any agent code runs. Faust crashes the fetcher and the worker exits, and
the same batch kills every restart: one hostile client stops a stage for good.

`install()` wraps aiokafka's batch unpacking (`PartitionRecords._unpack_records`, the one
place every fetched batch passes) so that a batch that raises is replaced by empty marker
records, one per offset it covers that was not delivered yet; the fetch position moves past
it. Records before it are delivered as usual, and the offsets stay contiguous, so Faust
acks and commits past the batch like past any other (a gap would stall its commits). The
agent asks `take_undecodable` about a record with a null value: the first marker carries
the reason, which the guard dead-letters with the offset range (the bytes stay in the
source topic); the others are covered by it and skipped. Missing codecs are refused at
worker start instead (`check_codecs`), so a misinstalled worker never turns good
compressed batches into dead letters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import structlog
from aiokafka.consumer import fetcher
from aiokafka.structs import ConsumerRecord

from streams.kafka.errors import CodecsMissing

log = structlog.get_logger("lychee.fetch")

UNDECODABLE = "undecodable"
COVERED = ""  # a marker whose batch was dead-lettered under its first marker

# (topic, partition, offset of the marker) -> reason. Written by Faust's consumer thread,
# read by the agents on the main loop: a lock, not the event loop, keeps it consistent.
_markers: dict[tuple[str, int, int], str] = {}
_lock = threading.Lock()
_original: Any = None
_topics: set[str] | None = set()  # the topics guarded; None: every topic

# A batch that starts past the fetch position leaves offsets out. On a log that is not
# compacted (none of ours is) that is a batch the broker has not written yet: Tansu reserves
# a produce's offsets (raises the high watermark) before it stores the batch, and a fetch
# in between returns the next producer's batch, already stored, past the hole. aiokafka takes
# the jump (as it would on a compacted topic) and Faust acks and commits over the gap: the
# batch is lost while the lag reads zero. So the position stays at the hole and the
# partition is fetched again; a hole still open after HOLE_GRACE_S is taken as a real gap.
HOLE_GRACE_S = 30.0
_holes: dict[tuple[str, int, int], float] = {}  # (topic, partition, offset) -> first seen


class _Hole(Exception):
    """The batch fetched starts past the position: fetch again from the position."""


def _hole_open(tp: Any, position: int, base: int) -> bool:
    """True while the hole at `position` is younger than the grace (the first sighting logs)."""
    key = (tp.topic, tp.partition, position)
    now = time.monotonic()
    with _lock:
        first_seen = _holes.get(key)
        if first_seen is None:
            _holes[key] = first_seen = now
            log.warning(
                "fetch.hole",
                topic=tp.topic,
                partition=tp.partition,
                position=position,
                next_batch=base,
            )
        if now - first_seen < HOLE_GRACE_S:
            return True
        del _holes[key]
    log.error(
        "fetch.gap_skipped",
        topic=tp.topic,
        partition=tp.partition,
        first=position,
        last=base - 1,
        waited_s=HOLE_GRACE_S,
    )
    return False


def check_codecs() -> None:
    """Refuse to start without every codec Kafka defines (gzip is in the stdlib)."""
    from aiokafka import codec

    missing = [
        name
        for name, present in (
            ("snappy", codec.has_snappy()),
            ("lz4", codec.has_lz4()),
            ("zstd", codec.has_zstd()),
        )
        if not present
    ]
    if missing:
        raise CodecsMissing(
            f"this worker cannot read {'/'.join(missing)}-compressed record batches, which "
            "standard producers send: install the aiokafka extras "
            "(pip install 'aiokafka[lz4,snappy,zstd]', which brings cramjam)"
        )


def take_undecodable(topic: str, partition: int, offset: int) -> str | None:
    """The reason a marker record stands at this offset (COVERED for the batch's later
    offsets, dead-lettered with the first), or None for a real record."""
    with _lock:
        return _markers.pop((topic, partition, offset), None)


class _Tracked:
    """A fetch's record set that remembers the batch being unpacked."""

    def __init__(self, records: Any, owner: Any) -> None:
        self._records = records
        self._owner = owner  # the PartitionRecords: its position and partition
        self.current: Any = None

    def has_next(self) -> bool:
        return bool(self._records.has_next())

    def next_batch(self) -> Any:
        batch = self.current = self._records.next_batch()
        base, position = int(batch.base_offset), self._owner.next_fetch_offset
        if base > position and _hole_open(self._owner._tp, position, base):
            raise _Hole
        if _holes:
            with _lock:
                _holes.pop((self._owner._tp.topic, self._owner._tp.partition, base), None)
        return batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._records, name)


def _guarded_unpack(self: Any) -> Iterator[ConsumerRecord[Any, Any]]:
    """aiokafka's own unpacking, resumed past any batch that raises (see the module doc)."""
    if _topics is not None and self._tp.topic not in _topics:
        yield from _original(self)
        return
    tracked = _Tracked(self._records, self)
    self._records = tracked
    while True:
        try:
            yield from _original(self)
            return
        except _Hole:
            return  # the position stays at the hole: aiokafka fetches from it again
        except Exception as exc:  # noqa: BLE001 - anything raised by one batch's bytes
            batch, tracked.current = tracked.current, None
            try:
                first, after = int(batch.base_offset), int(batch.next_offset)
            except Exception:  # noqa: BLE001 - not even the batch header: fail as before
                raise exc from None
            if after <= self.next_fetch_offset:
                raise
            tp = self._tp
            first = max(first, self.next_fetch_offset)
            reason = (
                f"undecodable record batch at {tp.topic}[{tp.partition}] offsets "
                f"{first}..{after - 1}: {type(exc).__name__}: {exc}"
            )
            with _lock:
                for offset in range(first, after):
                    _markers[(tp.topic, tp.partition, offset)] = (
                        reason if offset == first else COVERED
                    )
            log.error(
                "batch.undecodable",
                topic=tp.topic,
                partition=tp.partition,
                first=first,
                last=after - 1,
                error=repr(exc),
            )
            now_ms = int(time.time() * 1000)
            for offset in range(first, after):
                self.next_fetch_offset = offset + 1
                yield ConsumerRecord(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=offset,
                    timestamp=now_ms,
                    timestamp_type=0,
                    key=None,
                    value=None,
                    checksum=None,
                    serialized_key_size=-1,
                    serialized_value_size=-1,
                    headers=(),
                )


def install(topics: Iterable[str] | None = None) -> None:
    """Wrap aiokafka's batch unpacking in this process for `topics` (default: every topic;
    calls add up). A client guards only the topics whose markers it takes, so the other
    consumers of its process keep aiokafka's behaviour and leave no markers behind."""
    global _original, _topics
    cls = fetcher.PartitionRecords
    if _original is None:
        _original = cls._unpack_records
        cls._unpack_records = _guarded_unpack
    if topics is None or _topics is None:
        _topics = None
    else:
        _topics |= set(topics)


def uninstall() -> None:
    """Undo every `install()` (for tests that compare both behaviours)."""
    global _original, _topics
    if _original is not None:
        fetcher.PartitionRecords._unpack_records = _original
        _original = None
    _topics = set()
