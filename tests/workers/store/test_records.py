"""Records and evidence nodes on a real LanceDB directory, with a hashing embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from schemas.records import MemoryRecord, MemoryType, NodeType, Temporal
from tests.workers.builders import (
    HASH_DIM,
    HashEmbedder,
    batch,
    index_batches,
)
from workers.store import NODES, RECORDS, EmbeddingMismatch, EvidenceStore


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)


@pytest.fixture
def records(store: EvidenceStore) -> EvidenceStore:
    return store


@pytest.fixture
def emb() -> HashEmbedder:
    return HashEmbedder()


def table_rows(rs: EvidenceStore, name: str) -> list[dict[str, Any]]:
    tbl = rs.table(name)
    assert tbl is not None
    rows = tbl.to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def test_records_store_upsert_twice_leaves_tables_identical(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    batches = [
        batch("a", 0, ["Ann booked a trip to Lisbon", "Ann likes tiled houses"]),
        batch("a", 1, ["Ann moved the Lisbon trip to May"], temporal=Temporal(t_ref="2024-05")),
    ]
    first = index_batches(records, batches, emb)
    assert first["records"] == first["records_written"] == 3
    before = {n: table_rows(records, n) for n in (RECORDS, NODES)}
    calls = len(emb.calls)
    again = index_batches(records, batches, emb)
    assert again["records_written"] == again["nodes_written"] == 0
    assert len(emb.calls) == calls  # nothing new to embed
    after = {n: table_rows(records, n) for n in (RECORDS, NODES)}
    assert after == before
    # a redelivered tail (batch by batch, as after a crash) changes nothing either
    index_batches(records, batches[1:], emb)
    for b in batches:
        index_batches(records, [b], emb)
    assert {n: table_rows(records, n) for n in (RECORDS, NODES)} == before


def test_records_store_same_statement_in_two_segments_is_one_row(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    b0 = batch("a", 0, ["Ann is vegetarian"], tags=["food"])
    b1 = batch("a", 1, ["ann is   VEGETARIAN"], tags=["diet"], session="s2")
    index_batches(records, [b0], emb)
    index_batches(records, [b1], emb)
    rows = table_rows(records, RECORDS)
    assert len(rows) == 1
    (row,) = rows
    assert row["evidence"] == ["s1t0a", "s2t1a"]
    assert row["segment_ids"] == ["a/s1/0", "a/s2/1"]
    assert row["segment_id"] == "a/s1/0"
    assert row["source_session"] == "s1"
    assert row["semantic_text"] == "Ann is vegetarian"  # the first wording stays
    assert row["tags"] == ["food", "diet"]
    # both event frames link the one record
    frames = records.nodes.search_text("a", "session", 10, node_types=[NodeType.event_frame])
    assert sorted(f["key"] for f in frames) == ["a/s1/0", "a/s2/1"]
    assert all(f["record_ids"] == [row["id"]] for f in frames)


def test_records_store_merges_repeats_within_one_call(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    b0 = batch("a", 0, ["Ann is vegetarian"])
    b1 = batch("a", 1, ["Ann is vegetarian"])
    out = index_batches(records, [b0, b1], emb)
    assert out["records"] == 1
    (row,) = table_rows(records, RECORDS)
    assert row["segment_ids"] == ["a/s1/0", "a/s1/1"]
    assert emb.calls[0] == ["fact: Ann is vegetarian"]  # embedded once


def test_records_store_node_links_bounded_newest_kept(tmp_path: Path, emb: HashEmbedder) -> None:
    rs = EvidenceStore(
        str(tmp_path / "db"), emb.model_name, HASH_DIM, max_node_records=3, max_node_text_chars=120
    )
    texts = [f"Ann visited museum number {i}" for i in range(5)]
    for i, t in enumerate(texts):
        index_batches(rs, [batch("a", i, [t], tags=[])], emb)
    (ann,) = rs.nodes.search_text("a", "Ann", 5, node_types=["entity"])
    newest = rs.records.by_ids("a", ann["record_ids"])
    assert [r["semantic_text"] for r in newest] == texts[2:]
    assert ann["record_texts"] == texts[2:]
    assert len(ann["text"]) <= 120
    assert ann["text"].startswith(f"Ann\n{texts[4]}")
    assert texts[0] not in ann["text"]


def test_records_store_reads_never_cross_namespaces(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    index_batches(records, [batch("a", 0, ["secret lisbon trip plans"])], emb)
    index_batches(records, [batch("b", 0, ["lisbon trip plans shared"], tags=["work"])], emb)
    q = emb.embed(["lisbon trip plans"])[0]
    a_ids = [r["id"] for r in table_rows(records, RECORDS) if r["namespace"] == "a"]
    reads = [
        records.records.search_vector("b", q, 10),
        records.records.search_text("b", "secret lisbon", 10),
        records.nodes.search_vector("b", q, 50),
        records.nodes.search_text("b", "secret lisbon ann", 50),
        records.nodes.search_text("b", "lisbon", 50, node_types=["entity", "topic"]),
    ]
    for hits in reads:
        assert hits and {h["namespace"] for h in hits} == {"b"}
    assert records.records.by_ids("b", a_ids) == []
    assert records.count(RECORDS, "b") == 1
    assert records.count(RECORDS) == 2
    assert records.count_by_type("b")["nodes"] == {
        "entity": 1,
        "entity_topic": 1,
        "event_frame": 1,
        "topic": 1,
    }
    # a namespace that tries to widen the filter matches nothing
    assert records.records.search_text("b' OR '1'='1", "lisbon", 10) == []
    assert records.nodes.search_vector("b' OR '1'='1", q, 10) == []


def test_records_store_full_text_finds_record_by_word(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    index_batches(
        records, [batch("a", 0, ["Ann bought a red kayak", "Ann plays the cello on Sundays"])], emb
    )
    index_batches(records, [batch("a", 1, ["Ann sold her kayak in June"])], emb)  # after the index
    hits = records.records.search_text("a", "kayak", 10)
    assert sorted(h["semantic_text"] for h in hits) == [
        "Ann bought a red kayak",
        "Ann sold her kayak in June",
    ]
    assert "vector" not in hits[0]
    vec_hits = records.records.search_vector("a", emb.embed(["fact: Ann plays the cello"])[0], 1)
    assert vec_hits[0]["semantic_text"] == "Ann plays the cello on Sundays"


def test_records_store_temporal_nodes_and_node_type_filter(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    index_batches(
        records, [batch("a", 0, ["Ann ran a race"], temporal=Temporal(t_ref="2024-03-02"))], emb
    )
    hits = records.nodes.search_text("a", "March 2024", 10, node_types=[NodeType.temporal])
    assert sorted(h["key"] for h in hits) == ["day:2024-03-02", "month:2024-03"]
    assert records.nodes.search_text("a", "March", 10, node_types=[]) == []


def test_records_store_count_by_type(records: EvidenceStore, emb: HashEmbedder) -> None:
    index_batches(
        records,
        [
            batch("a", 0, ["Ann likes jazz", "Ann likes tea"], mtype=MemoryType.preference),
            batch("a", 1, ["Ann lives in Porto"], entities=["Ann", "Porto"]),
        ],
        emb,
    )
    counts = records.count_by_type("a")
    assert counts["records"] == {"fact": 1, "preference": 2}
    assert counts["nodes"] == {"entity": 2, "entity_topic": 2, "event_frame": 2, "topic": 1}
    assert records.count_by_type("nobody") == {"records": {}, "nodes": {}}


def test_records_store_builds_ann_index_past_min_rows_only(
    store: EvidenceStore, emb: HashEmbedder
) -> None:
    rs = store
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(200)]

    def texts(n: int, offset: int) -> list[str]:
        return [" ".join(rng.choice(words, 6)) + f" item{offset + i}" for i in range(n)]

    index_batches(rs, [batch("a", 0, texts(150, 0), entities=[], tags=[])], emb)
    assert rs.maybe_build_ann(min_rows=300) == []
    index_batches(rs, [batch("a", 1, texts(150, 150), entities=[], tags=[])], emb)
    assert rs.maybe_build_ann(min_rows=300) == [RECORDS]  # nodes: 2 frames; no turns table
    tbl = rs.table(RECORDS)
    assert tbl is not None
    assert [i.index_type for i in tbl.list_indices() if i.columns == ["vector"]] == ["IvfHnswSq"]
    assert rs.maybe_build_ann(min_rows=300) == []  # once only
    probe = table_rows(rs, RECORDS)[5]
    hits = rs.records.search_vector("a", np.asarray(probe["vector"]), 3)
    assert hits[0]["id"] == probe["id"]
    # a namespace within `exact_max_rows` is searched exactly; past it, through the index
    vec = np.asarray(probe["vector"], dtype=np.float32)
    for max_rows, node in ((300, "KNNVectorDistance"), (299, "ANNSubIndex")):
        store.db.exact_max_rows, store.db._sizes = max_rows, {}
        plan = store.db.vector_query(tbl, RECORDS, vec, "namespace = 'a'", "a").explain_plan()
        assert node in plan and ("ANN" in plan) == (node == "ANNSubIndex")
        assert rs.records.search_vector("a", vec, 3)[0]["id"] == probe["id"]


def test_records_store_refuses_another_embedding_model(
    records: EvidenceStore, emb: HashEmbedder, tmp_path: Path
) -> None:
    index_batches(records, [batch("a", 0, ["Ann likes jazz"])], emb)
    for model, dim in (("other-model", HASH_DIM), (HashEmbedder.model_name, 8)):
        other = EvidenceStore(str(tmp_path / "db"), model, dim)
        with pytest.raises(EmbeddingMismatch, match="hash-16 embeddings of dimension 16"):
            other.table(RECORDS)
        with pytest.raises(EmbeddingMismatch):
            other.records.search_text("a", "jazz", 5)


def test_records_store_refuses_an_embedder_of_another_model(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    emb.model_name = "something-else"
    with pytest.raises(EmbeddingMismatch, match="something-else"):
        index_batches(records, [batch("a", 0, ["Ann likes jazz"])], emb)
    assert records.table(RECORDS) is None


def test_records_store_records_by_ids_keeps_the_asked_order(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    index_batches(records, [batch("a", 0, ["one thing", "two things", "three things"])], emb)
    ids = [r["id"] for r in table_rows(records, RECORDS)]
    asked = [ids[2], "missing", ids[0]]
    assert [r["id"] for r in records.records.by_ids("a", asked)] == [ids[2], ids[0]]


def test_records_store_empty_batches_write_no_record(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    out = index_batches(records, [batch("a", 0, [])], emb)
    assert out == {
        "records": 0,
        "records_written": 0,
        "nodes": 0,
        "nodes_written": 0,
        "segments_written": 1,  # the segment is kept for timelines, recordless or not
    }
    assert records.table(RECORDS) is None
    assert records.count(NODES) == 0
    assert records.records.search_text("a", "x", 5) == []


def _record(rows: list[dict[str, Any]], text: str) -> dict[str, Any]:
    return next(r for r in rows if r["semantic_text"] == text)


def test_records_store_record_row_fields(records: EvidenceStore, emb: HashEmbedder) -> None:
    b = batch("a", 0, ["Ann ran a race"], temporal=Temporal(t_ref="2024-03-02", t_valid_to="2025"))
    index_batches(records, [b], emb)
    row = _record(table_rows(records, RECORDS), "Ann ran a race")
    r: MemoryRecord = b.records[0]
    assert row["id"] == r.record_id
    assert row["memory_type"] == "fact"
    assert row["normalized_text"] == "fact: Ann ran a race"
    assert (row["t_ref"], row["t_valid_from"], row["t_valid_to"]) == ("2024-03-02", "", "2025")
    assert row["entities"] == ["Ann"] and row["tags"] == ["travel"]
    assert row["created_at"] == b.session_date
    assert np.allclose(row["vector"], emb.embed([r.normalized_text])[0])


def test_records_store_occurrences_in_either_order_make_the_same_row(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    # Two encoders publish the segments of two sessions in either order into a namespace's
    # partition: the row may not depend on which arrived first.
    b0 = batch("a", 0, ["Ann is vegetarian"], tags=["food"], temporal=Temporal(t_ref="2024-03"))
    b1 = batch(
        "a",
        1,
        ["ann is   VEGETARIAN"],
        tags=["diet"],
        session="s2",
        temporal=Temporal(t_ref="2024-02"),
    )
    rows = []
    for i, order in enumerate(([b0, b1], [b1, b0])):
        rs = EvidenceStore(str(tmp_path / f"db{i}"), emb.model_name, HASH_DIM)
        for b in order:
            index_batches(rs, [b], emb)
        (row,) = table_rows(rs, RECORDS)
        rows.append({k: sorted(v) if isinstance(v, list) else v for k, v in row.items()})
    assert rows[0] == rows[1]
    assert rows[0]["source_session"] == "s1" and rows[0]["semantic_text"] == "Ann is vegetarian"
    assert rows[0]["t_ref"] == "2024-02"


def node_vector(store: EvidenceStore, node: str) -> np.ndarray:
    tbl = store.table(NODES)
    assert tbl is not None
    (vec,) = [np.asarray(r["vector"]) for r in tbl.to_arrow().to_pylist() if r["id"] == node]
    return vec


def record_vectors(store: EvidenceStore) -> dict[str, np.ndarray]:
    return {r["id"]: np.asarray(r["vector"]) for r in table_rows(store, RECORDS)}


def test_a_nodes_vector_is_its_label_plus_its_head_records_and_only_labels_are_embedded(
    store: EvidenceStore, emb: HashEmbedder
) -> None:
    long = "Ann walked the whole Lisbon riverside from Belem to the old docks " * 4
    index_batches(store, [batch("a", 0, ["Ann booked a trip to Lisbon", long, "Ann paints"])], emb)
    embedded = {t for call in emb.calls for t in call}  # before the test's own calls below
    node = table_rows(store, NODES)
    ann = next(r for r in node if r["id"] == "a/entity/ann")
    head = ann["record_ids"][:2]  # "Ann" + the first text + the long one pass 240 characters
    assert [t[:10] for t in ann["record_texts"]] == ["Ann booked", "Ann walked", "Ann paints"]
    recs = record_vectors(store)
    expected = emb.embed(["Ann"])[0] + recs[head[0]] + recs[head[1]]
    expected /= np.linalg.norm(expected)
    assert np.allclose(node_vector(store, "a/entity/ann"), expected, atol=1e-6)
    (frame,) = [r for r in node if r["node_type"] == "event_frame"]
    frame_text = "\n".join([frame["label"], *frame["record_texts"]])[:240]
    assert np.allclose(node_vector(store, frame["id"]), emb.embed([frame_text])[0], atol=1e-6)
    (pair,) = [r for r in node if r["node_type"] == "entity_topic"]
    assert pair["label"] == "Ann / travel"
    label = emb.embed(["Ann"])[0] + emb.embed(["travel"])[0]  # a pair's label: its parts'
    expected = label / np.linalg.norm(label) + recs[head[0]] + recs[head[1]]
    assert np.allclose(node_vector(store, pair["id"]), expected / np.linalg.norm(expected))
    node_texts = embedded - {r["normalized_text"] for r in table_rows(store, RECORDS)}
    # labels only, but an event frame's (it says nothing): its head as one text
    assert node_texts == {r["label"] for r in node if r not in (frame, pair)} | {frame_text}


def test_a_node_keeps_its_vector_once_its_head_is_full_and_not_before(
    store: EvidenceStore, emb: HashEmbedder
) -> None:
    long = "Ann walked the whole Lisbon riverside from Belem to the old docks " * 4
    index_batches(store, [batch("a", 0, [long], tags=("walks",))], emb)
    index_batches(store, [batch("a", 1, ["Ann booked a trip to Porto"], tags=("trips",))], emb)
    full, short = node_vector(store, "a/entity/ann"), node_vector(store, "a/topic/trips")
    index_batches(store, [batch("a", 2, ["Ann rode a tram"], tags=("trips",))], emb)
    assert np.array_equal(node_vector(store, "a/entity/ann"), full)  # gained a link, same head
    assert not np.allclose(node_vector(store, "a/topic/trips"), short)  # its head grew
    recs = record_vectors(store)
    trips = next(r for r in table_rows(store, NODES) if r["id"] == "a/topic/trips")
    expected = emb.embed(["trips"])[0] + sum(recs[i] for i in trips["record_ids"])
    assert np.allclose(node_vector(store, "a/topic/trips"), expected / np.linalg.norm(expected))


def test_records_store_context_is_searched_but_not_shown(
    records: EvidenceStore, emb: HashEmbedder
) -> None:
    b = batch("a", 0, ["Ann and Kai rented a cabin by the fjord"])
    rec = b.records[0].model_copy(update={"context": "Oslo, brother"})
    index_batches(records, [b.model_copy(update={"records": [rec]})], emb)
    (hit,) = records.records.search_text("a", "oslo", 10)
    assert hit["semantic_text"] == "Ann and Kai rented a cabin by the fjord"
    assert hit["search_text"] == f"{rec.normalized_text} (context: Oslo, brother)"
    (row,) = table_rows(records, RECORDS)
    assert np.allclose(row["vector"], emb.embed([hit["search_text"]])[0])


def test_records_store_a_table_without_search_text_is_migrated_by_its_writer(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    import lancedb

    from workers.store.records import records_schema

    old = pa.schema(
        [
            f
            for f in records_schema(HASH_DIM, emb.model_name)
            if f.name not in ("context", "search_text")
        ],
        metadata=records_schema(HASH_DIM, emb.model_name).metadata,
    )
    first = batch("a", 0, ["Ann bought a red kayak"]).records[0]
    row = {f.name: None for f in old} | {
        "id": first.record_id,
        "namespace": "a",
        "memory_type": "fact",
        "semantic_text": first.semantic_text,
        "normalized_text": first.normalized_text,
        "entities": [],
        "tags": [],
        "evidence": first.evidence,
        "segment_ids": [],
        "source_session": "s1",
        "segment_id": first.segment_id,
        "confidence": 1.0,
        "vector": emb.embed([first.normalized_text])[0].tolist(),
        "sources": [],
    }
    lancedb.connect(str(tmp_path / "db")).create_table(RECORDS, pa.Table.from_pylist([row], old))
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    assert [h["id"] for h in store.records.search_text("a", "kayak", 5)] == [first.record_id]
    index_batches(store, [batch("a", 1, ["Ann sold her kayak in June"])], emb)
    rows = table_rows(store, RECORDS)
    assert [r["search_text"] for r in rows if r["id"] == first.record_id] == [first.normalized_text]
    assert len(store.records.search_text("a", "kayak", 5)) == 2
