"""Builders shared by the worker tests: segments, record batches, raw turns and a
deterministic hashing embedder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from schemas import (
    FinalizeReason,
    RawTurn,
    Role,
    Segment,
    SegmentExchange,
    SegmentMode,
    Turn,
    segment_id,
)
from schemas.records import MemoryRecord, MemoryType, RecordBatch, Temporal
from workers.embedding import Embedder
from workers.encoder.encoded import build_record
from workers.indexer.nodes import updates_of
from workers.indexer.service import IndexBatch, IndexerService
from workers.store import EvidenceStore

TOY_DIM = 8


def segment_of(
    exchanges: Sequence[SegmentExchange],
    *,
    date: datetime | None = None,
    ns: str = "ns",
    session: str = "s1",
    index: int = 0,
) -> Segment:
    """A semantic, session-flushed segment; turn range and tokens come from the exchanges."""
    turn_ids = [t for ex in exchanges for t in ex.turn_ids]
    return Segment(
        segment_id=segment_id(ns, session, index),
        namespace=ns,
        session_id=session,
        index=index,
        mode=SegmentMode.semantic,
        reason=FinalizeReason.session_flush,
        exchanges=list(exchanges),
        first_turn_id=turn_ids[0],
        last_turn_id=turn_ids[-1],
        tokens=sum(ex.tokens for ex in exchanges),
        session_date=date,
    )


def make_segment(
    ns: str = "a", session: str = "s1", index: int = 0, turn_ids: Sequence[str] = ("t1", "t2")
) -> Segment:
    ex = SegmentExchange(
        exchange_id=f"{session}:e{index}",
        seq=index,
        turn_ids=list(turn_ids),
        turns=[Turn(role=Role.user, content="hello", speaker="Ann") for _ in turn_ids],
        tokens=4,
    )
    return segment_of([ex], date=datetime(2024, 3, 2, 10, 0), ns=ns, session=session, index=index)


def make_batch(seg: Segment, records: list[MemoryRecord]) -> RecordBatch:
    return RecordBatch(
        namespace=seg.namespace,
        session_id=seg.session_id,
        segment_id=seg.segment_id,
        segment_index=seg.index,
        first_turn_id=seg.first_turn_id,
        last_turn_id=seg.last_turn_id,
        session_date=seg.session_date,
        encoder="extractive",
        records=records,
    )


def batch(
    ns: str,
    index: int,
    texts: Sequence[str],
    entities: Sequence[str] = ("Ann",),
    tags: Sequence[str] = ("travel",),
    session: str = "s1",
    temporal: Temporal | None = None,
    mtype: MemoryType = MemoryType.fact,
) -> RecordBatch:
    turn_ids = (f"{session}t{index}a", f"{session}t{index}b")
    seg = make_segment(ns, session, index, turn_ids)
    recs = [
        build_record(seg, mtype, t, [turn_ids[0]], entities=entities, tags=tags, temporal=temporal)
        for t in texts
    ]
    return make_batch(seg, recs)


def statement(
    ns: str,
    session: str,
    n: int,
    day: datetime,
    text: str,
    tid: str,
    temporal: Temporal | None = None,
) -> RecordBatch:
    """One user's statement as the `n`th segment of a conversation, its one record said on
    `day`: the record batches the supersession rules read."""
    ex = SegmentExchange(
        exchange_id=f"{session}:e{n}",
        seq=n,
        turn_ids=[tid],
        turns=[Turn(role=Role.user, content=text, speaker="Ann")],
        tokens=8,
    )
    seg = segment_of([ex], date=day, ns=ns, session=session, index=n)
    rec = build_record(seg, MemoryType.fact, text, [tid], temporal=temporal, source_role="user")
    return make_batch(seg, [rec])


def turn(ns: str, tid: str, text: str, axis: int, session: str = "s1") -> RawTurn:
    v = np.zeros(TOY_DIM, dtype=np.float32)
    v[axis] = 1.0
    return RawTurn(
        namespace=ns,
        session_id=session,
        turn_id=tid,
        exchange_id=f"{session}:{tid}",
        seq=int(tid[1:]),
        index=0,
        role=Role.user,
        speaker="Ann",
        text=text,
        session_date=datetime(2024, 3, 2),
        embedding=v.tolist(),
        embedding_model="toy",
    )


HASH_DIM = 16


class HashEmbedder:
    """Bag of hashed words: texts sharing words get close vectors; deterministic."""

    model_name = "hash-16"
    dim = HASH_DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), HASH_DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
                out[i, h % HASH_DIM] += 1.0 if h & 1 << 20 else -1.0
            if not out[i].any():
                out[i, 0] = 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def index_batches(
    store: EvidenceStore, batches: Sequence[RecordBatch], embedder: Embedder
) -> dict[str, int]:
    """Records and nodes of `batches` written as the indexer writes them."""
    return store.upsert_batches(batches, updates_of(batches), embedder)


def store_of(path: str, texts: Sequence[str], ns: str = "a") -> EvidenceStore:
    """A store at `path` holding one record per text of namespace `ns`, each its own
    segment, written with the `HashEmbedder`."""
    store = EvidenceStore(path, HashEmbedder.model_name, HASH_DIM)
    index_batches(store, [batch(ns, i, [t]) for i, t in enumerate(texts)], HashEmbedder())
    return store


def user_turn(
    session: str, day: datetime, tid: str, text: str, embedder: Embedder, seq: int = 0
) -> RawTurn:
    """Ann's raw turn in namespace `a`, with `embedder`'s vector, as the indexer gets it."""
    return RawTurn(
        namespace="a",
        session_id=session,
        turn_id=tid,
        exchange_id=f"{session}:e{seq}",
        seq=seq,
        index=0,
        role=Role.user,
        speaker="Ann",
        text=text,
        session_date=day,
        embedding=embedder.embed([text])[0].tolist(),
        embedding_model=embedder.model_name,
    )


async def said_in_turns(
    indexer: IndexerService, embedder: Embedder, said: Sequence[tuple[str, datetime, str, str]]
) -> None:
    """Each (session, day, turn id, text) of namespace `a` as the indexer gets it: the user's
    raw turn, then its record (`statement`, a segment of its own)."""
    for n, (session, day, tid, text) in enumerate(said):
        raw = user_turn(session, day, tid, text, embedder, n)
        await indexer.write(
            IndexBatch(turns=[raw], records=[statement("a", session, n, day, text, tid)])
        )
