"""The `segments` table: where each segment sits in its session and why it was closed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas import BoundarySignals, FinalizeReason
from schemas.records import RecordBatch
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from workers.forget import Source
from workers.store import SEGMENTS, EvidenceStore

SIGNALS = BoundarySignals(
    surprise=0.41,
    robust_surprise=1.5,
    absolute_surprise=1.5,
    cohesion_drop=0.05,
    cohesion_term=0.8,
    length_pressure=0.45,
    turn_pressure=0.3,
    score=2.0,
    p_cut=0.71,
)


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)


def placed(b: RecordBatch, first: int, last: int, reason: FinalizeReason) -> RecordBatch:
    signals = SIGNALS if reason is FinalizeReason.semantic_boundary else None
    return b.model_copy(
        update={
            "first_seq": first,
            "last_seq": last,
            "reason": reason,
            "signals": signals,
            "exchanges": last - first + 1,
        }
    )


def session_of(store: EvidenceStore, n: int, session: str = "s1") -> list[RecordBatch]:
    """`n` segments of 3 exchanges each, the first closed by a semantic cut."""
    out = []
    for i in range(n):
        reason = FinalizeReason.semantic_boundary if i == 0 else FinalizeReason.target_length
        out.append(
            placed(
                batch("a", i, [f"fact {i} of {session}"], session=session), 3 * i, 3 * i + 2, reason
            )
        )
    index_batches(store, out, HashEmbedder())
    return out


def test_segments_store_keeps_reason_signals_seqs_and_record_ids_in_order(
    store: EvidenceStore,
) -> None:
    written = session_of(store, 3)
    rows = store.segments.of_session("a", "s1")
    assert [r["segment_index"] for r in rows] == [0, 1, 2]
    first = rows[0]
    assert first["reason"] == "semantic_boundary" and first["signals"] == SIGNALS.model_dump()
    assert (first["first_seq"], first["last_seq"], first["exchanges"]) == (0, 2, 3)
    assert first["record_ids"] == [r.record_id for r in written[0].records]
    assert first["first_turn_id"] == "s1t0a" and first["session_date"] == datetime(2024, 3, 2, 10)
    assert rows[1]["reason"] == "target_length" and rows[1]["signals"] is None
    assert "sources" not in first  # lineage stays internal


def test_segments_store_of_session_keeps_only_segments_overlapping_the_seqs(
    store: EvidenceStore,
) -> None:
    session_of(store, 4)  # seqs 0-2, 3-5, 6-8, 9-11
    assert [r["segment_index"] for r in store.segments.of_session("a", "s1", 4, 6)] == [1, 2]
    assert [r["segment_index"] for r in store.segments.of_session("a", "s1", 12, 20)] == []
    assert store.segments.of_session("a", "s2") == [] and store.segments.of_session("b", "s1") == []


def test_segments_store_redelivered_batch_keeps_one_row(store: EvidenceStore) -> None:
    written = session_of(store, 2)
    index_batches(store, written, HashEmbedder())
    assert store.count(SEGMENTS, "a") == 2


def test_segments_store_batch_of_an_older_encoder_is_kept_without_placement(
    store: EvidenceStore,
) -> None:
    index_batches(store, [batch("a", 0, ["a fact"])], HashEmbedder())
    (row,) = store.segments.of_session("a", "s1", 0, 5)  # unknown seqs overlap any range
    assert row["reason"] is None and row["signals"] is None and row["first_seq"] is None


def test_segments_store_forget_keeps_segments_from_after_the_fence(store: EvidenceStore) -> None:
    old = placed(batch("a", 0, ["old fact"]), 0, 2, FinalizeReason.session_flush)
    new = placed(batch("a", 1, ["new fact"]), 3, 5, FinalizeReason.session_flush)
    emb = HashEmbedder()
    store.upsert_batches([old, new], [], emb, [Source(0, 4), Source(0, 12)])
    done = store.forget("a", "s1", emb, fence={0: 10})
    assert done.rows_removed[SEGMENTS] == 1
    assert [r["segment_index"] for r in store.segments.of_session("a", "s1")] == [1]


def test_segments_store_expire_removes_segments_of_old_sessions(store: EvidenceStore) -> None:
    session_of(store, 2)
    done = store.expire(datetime(2025, 1, 1, tzinfo=UTC), HashEmbedder())
    assert done.rows_removed[SEGMENTS] == 2 and store.count(SEGMENTS, "a") == 0
    assert sorted(done.segments) == ["a/s1/0", "a/s1/1"]  # for what the encoder keeps of them
