"""The evidence store on a real LanceDB directory."""

from __future__ import annotations

from datetime import datetime

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from schemas import RawTurn, Role
from workers.indexer.store import TURNS, EmbeddingMismatch, EvidenceStore

DIM = 8


def turn(ns: str, tid: str, text: str, axis: int, session: str = "s1") -> RawTurn:
    v = np.zeros(DIM, dtype=np.float32)
    v[axis] = 1.0
    return RawTurn(
        namespace=ns, session_id=session, turn_id=tid, exchange_id=f"{session}:{tid}", seq=int(tid[1:]),
        index=0, role=Role.user, speaker="Ann", text=text, session_date=datetime(2024, 3, 2),
        embedding=v.tolist(), embedding_model="toy",
    )  # fmt: skip


@pytest.fixture
def store(tmp_path) -> EvidenceStore:  # type: ignore[no-untyped-def]
    return EvidenceStore(str(tmp_path / "db"), "toy", DIM)


def test_store_upsert_is_idempotent_on_turn_ids(store: EvidenceStore) -> None:
    batch = [turn("a", "t1", "sourdough starter doubled", 0), turn("a", "t2", "half marathon", 1)]
    store.upsert_turns(batch)
    store.upsert_turns(batch)
    store.upsert_turns([turn("a", "t2", "half marathon training", 1)])
    assert store.count("turns") == 2
    hits = store.search_turns_text("a", "training", 5)
    assert [h["turn_id"] for h in hits] == ["t2"]


def test_store_same_turn_id_in_two_namespaces_is_two_rows(store: EvidenceStore) -> None:
    store.upsert_turns([turn("a", "t1", "x one", 0), turn("b", "t1", "x two", 0)])
    assert store.count("turns") == 2
    assert store.count("turns", "a") == 1


def test_store_reads_never_cross_namespaces(store: EvidenceStore) -> None:
    store.upsert_turns(
        [turn("a", "t1", "secret lisbon trip", 0), turn("b", "t2", "lisbon trip plans", 0)]
    )
    q = np.eye(DIM, dtype=np.float32)[0]
    assert {h["namespace"] for h in store.search_turns_vectors("b", q[None, :], 10)[0]} == {"b"}
    assert {h["namespace"] for h in store.search_turns_text("b", "secret lisbon", 10)} == {"b"}
    # a namespace that tries to widen the filter matches nothing
    assert store.search_turns_text("b' OR '1'='1", "lisbon", 10) == []


def test_store_session_filter(store: EvidenceStore) -> None:
    store.upsert_turns([turn("a", "t1", "lisbon", 0, "s1"), turn("a", "t2", "lisbon", 0, "s2")])
    hits = store.search_turns_text("a", "lisbon", 10, session_id="s2")
    assert [h["turn_id"] for h in hits] == ["t2"]


def test_store_refuses_another_embedding_model(store: EvidenceStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store.upsert_turns([turn("a", "t1", "x", 0)])
    other = EvidenceStore(str(tmp_path / "db"), "other-model", DIM)
    with pytest.raises(EmbeddingMismatch, match="toy"):
        other.table("turns")
    with pytest.raises(EmbeddingMismatch):
        store.upsert_turns(
            [turn("a", "t9", "x", 0).model_copy(update={"embedding_model": "other"})]
        )


def test_store_new_rows_searchable_before_optimize(store: EvidenceStore) -> None:
    store.upsert_turns([turn("a", "t1", "first row", 0)])  # creates the indexes
    store.upsert_turns([turn("a", "t2", "kayak on the river", 1)])  # not yet in the FTS index
    assert [h["turn_id"] for h in store.search_turns_text("a", "kayak", 5)] == ["t2"]
    store.optimize()
    assert [h["turn_id"] for h in store.search_turns_text("a", "kayak", 5)] == ["t2"]


def test_store_finds_its_tables_among_many(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # lancedb's deprecated table_names() lists one page of 10: the 13th table went missing
    db = lancedb.connect(str(tmp_path / "db"))
    for i in range(12):
        db.create_table(f"a{i:02d}", schema=pa.schema([("x", pa.int64())]))
    EvidenceStore(str(tmp_path / "db"), "toy", DIM).upsert_turns([turn("a", "t1", "hello", 0)])
    fresh = EvidenceStore(str(tmp_path / "db"), "toy", DIM)
    assert fresh.table(TURNS) is not None and fresh.count(TURNS) == 1
