"""The indexer's maintenance beside its writes: no writer waits behind `optimize`."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from streams.kafka.rules import is_transient
from tests.workers.builders import TOY_DIM, turn
from workers.indexer.service import IndexBatch, IndexerService
from workers.store import ALL_TABLES, EvidenceStore
from workers.store.errors import CommitConflict
from workers.store.writes import is_commit_conflict, upsert_rows
from workers.store.writes import overtaken as overtaken_by_a_write


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)


async def test_indexer_write_does_not_wait_for_a_running_optimize(store: EvidenceStore) -> None:
    svc = IndexerService(store)
    await svc.write(IndexBatch(turns=[turn("ns", "t1", "hello", 0)]))
    entered, release = threading.Event(), threading.Event()
    compact = store.optimize

    def slow_compaction(names: Any = None) -> Any:  # a compaction that takes its time
        entered.set()
        release.wait(60)
        return compact(names)

    store.optimize = slow_compaction  # type: ignore[method-assign]
    running = asyncio.create_task(svc.optimize(10**9))
    try:
        assert await asyncio.to_thread(entered.wait, 30)
        write = svc.write(IndexBatch(turns=[turn("ns", "t2", "world", 1)]))
        assert (await asyncio.wait_for(write, 30))["turns"] == 1
    finally:
        release.set()
        report = await running
    assert store.count("turns", "ns") == 2
    assert report.optimized == ["turns"]


async def test_indexer_optimize_spent_budget_defers_the_rest_to_the_next_call(
    store: EvidenceStore,
) -> None:
    svc = IndexerService(store)
    await svc.write(IndexBatch(turns=[turn("ns", "t1", "hello", 0)]))
    reports = [await svc.optimize(10**9, budget_s=0) for _ in range(6)]
    turns, records, nodes, segments, links = ALL_TABLES
    # one table per call, in turn: each call starts where the last one stopped
    assert [r.deferred for r in reports] == [
        [records, nodes, segments, links],
        [nodes, segments, links, turns],
        [segments, links, turns, records],
        [links, turns, records, nodes],
        [turns, records, nodes, segments],
        [records, nodes, segments, links],
    ]
    assert reports[0].optimized == reports[5].optimized == ["turns"]


class _Conflicting:
    """A LanceDB table whose first commits lose to a concurrent compaction."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.executed = 0
        self.stored: list[str] = []

    def merge_insert(self, on: str) -> _Conflicting:
        return self

    def search(self) -> _Conflicting:  # the read-back of the written ids: each stored once
        return self

    def where(self, clause: str) -> _Conflicting:
        return self

    def select(self, columns: list[str]) -> _Conflicting:
        return self

    def limit(self, n: int | None) -> _Conflicting:
        return self

    def to_arrow(self) -> pa.Table:
        return pa.table({"id": pa.array(self.stored, pa.string())})

    def when_matched_update_all(self) -> _Conflicting:
        return self

    def when_not_matched_insert_all(self) -> _Conflicting:
        return self

    def execute(self, data: pa.Table) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise RuntimeError(
                "lance error: Retryable commit conflict for version 24: This Update transaction "
                "was preempted by concurrent transaction Rewrite at version 24. Please retry."
            )
        self.executed += 1
        self.stored = list(dict.fromkeys([*self.stored, *data.column("id").to_pylist()]))


def test_store_upsert_retries_a_lost_commit_then_reports_it_as_transient() -> None:
    data = pa.table({"id": ["a"]})
    tbl = _Conflicting(conflicts=2)
    upsert_rows(tbl, data)
    assert tbl.executed == 1
    with pytest.raises(CommitConflict) as lost:
        upsert_rows(_Conflicting(conflicts=100), data)
    assert is_transient(lost.value)  # the stage pauses and retries; nothing is dead-lettered
    with pytest.raises(RuntimeError, match="disk on fire"):
        upsert_rows(_Raising(), data)


def test_maintenance_overtaken_by_a_write_is_told_from_a_failure() -> None:
    overtaken = RuntimeError(
        "lance error: CreateIndex transaction is incompatible with concurrent transaction "
        "Overwrite at version 12"
    )
    assert overtaken_by_a_write(overtaken) and not is_commit_conflict(overtaken)
    assert overtaken_by_a_write(CommitConflict("lost", retry_after_s=1.0))
    assert not overtaken_by_a_write(RuntimeError("disk on fire"))


class _Raising(_Conflicting):
    def __init__(self) -> None:
        super().__init__(0)

    def execute(self, data: pa.Table) -> None:
        raise RuntimeError("disk on fire")


class CountingEmbedder:
    """The real model, with every text it is given recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts += texts
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def minilm() -> Any:
    from workers.embedding.onnx import OnnxEmbedder

    return OnnxEmbedder()


async def test_indexer_writes_raw_turns_with_the_segmenters_vectors_and_no_model_call(
    tmp_path: Path, minilm: Any
) -> None:
    from datetime import datetime

    from schemas import Exchange, Role, Turn
    from workers.segmenter.vectors import embed_exchanges, raw_turns

    exchanges = [
        Exchange(
            namespace="a",
            session_id="s1",
            seq=i,
            exchange_id=f"s1:{i}",
            session_date=datetime(2024, 3, 2, 18, 0),
            turns=[Turn(role=Role.user, speaker="Ann", content=text, turn_id=f"t{i}")],
        )
        for i, text in enumerate(["I planted six tomato seedlings.", "The train leaves at 8:12."])
    ]
    counting = CountingEmbedder(minilm)
    turns = [
        raw
        for ex, (_, vecs) in zip(exchanges, embed_exchanges(counting, exchanges), strict=True)
        for raw in raw_turns(ex, vecs, counting.model_name)
    ]
    assert len(counting.texts) == 2  # the segmenter: one text per exchange
    store = EvidenceStore(str(tmp_path / "db"), minilm.model_name, minilm.dim)
    written = await IndexerService(store, counting).write(IndexBatch(turns=turns))
    assert written["turns"] == 2 and len(counting.texts) == 2  # the indexer: none


async def test_indexer_labels_repeated_across_segments_reach_the_model_once(
    tmp_path: Path, minilm: Any
) -> None:
    from tests.workers.builders import batch
    from workers.embedding.cache import CachedEmbedder

    counting = CountingEmbedder(minilm)
    indexer = IndexerService(
        EvidenceStore(str(tmp_path / "db"), minilm.model_name, minilm.dim),
        CachedEmbedder(counting),  # as every stage's embedder is built (streams.factories)
    )
    first = batch("a", 0, ["Ann booked the train to Montreux."], tags=("travel",))
    await indexer.write(IndexBatch(records=[first]))
    seen = list(counting.texts)
    assert "Ann" in seen and "travel" in seen  # entity and topic labels, embedded
    assert not any(" / " in t for t in seen)  # their pair's label is made of theirs
    del counting.texts[:]
    second = batch("a", 1, ["Ann packed a picnic blanket."], tags=("travel",))
    await indexer.write(IndexBatch(records=[second]))
    assert "Ann packed a picnic blanket." in " ".join(counting.texts)  # the new record
    assert not {"Ann", "travel"} & set(counting.texts)  # the repeated labels: not again


async def test_indexer_tells_the_namespaces_it_wrote_and_the_table_versions_it_left(
    tmp_path: Path,
) -> None:
    from collections.abc import Iterable, Mapping

    from tests.workers.builders import HASH_DIM, HashEmbedder, batch
    from tests.workers.store.test_forget import raw
    from workers.store import NODES, RECORDS, TABLES, TURNS

    emb = HashEmbedder()
    store = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    told: list[tuple[set[str] | None, dict[str, int]]] = []

    async def record(namespaces: Iterable[str] | None, versions: Mapping[str, int]) -> None:
        told.append((None if namespaces is None else set(namespaces), dict(versions)))

    svc = IndexerService(store, emb, on_written=record)
    await svc.write(IndexBatch(turns=[raw("a", "s1", "t1", "Ann booked a trip", emb)]))
    assert told == [({"a"}, store.versions([TURNS]))]
    await svc.write(IndexBatch(records=[batch("a", 0, ["Ann booked"]), batch("b", 0, ["Ben"])]))
    assert told[-1] == ({"a", "b"}, store.versions([RECORDS, NODES]))
    await svc.forget("b", None, {})  # every namespace: no snapshot older than it is kept
    assert told[-1] == (None, store.versions(TABLES)) and len(told) == 3
    assert all(v >= 1 for _, versions in told for v in versions.values())


async def test_a_forget_of_the_middle_of_a_chain_links_its_ends(tmp_path: Path) -> None:
    """$1,200, now $1,100, now $1,000: with the middle session forgotten, $1,000 still
    replaces $1,200 (the rules read the records that lost a link again)."""
    from datetime import datetime

    from tests.workers.builders import HASH_DIM, HashEmbedder, statement

    emb = HashEmbedder()
    store = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    svc = IndexerService(store, emb)
    ids = []
    for i, amount in enumerate(["is $1,200", "is now $1,100", "is now $1,000"]):
        session = f"s{i}"
        said = statement(
            "a",
            session,
            0,
            datetime(2024, 1 + i, 10),
            f"Ann's monthly rent {amount}.",
            f"{session}t0",
        )
        await svc.write(IndexBatch(records=[said]))
        ids.append(said.records[0].record_id)

    def pairs() -> set[tuple[str, str]]:
        return {(x.older_id, x.newer_id) for x in store.links.of_namespace("a")}

    assert pairs() == {(ids[0], ids[1]), (ids[1], ids[2])}
    await svc.forget("a", "s1", {})
    assert pairs() == {(ids[0], ids[2])}
