"""Forgetting a namespace or a session in a real LanceDB directory: rows, links, files."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schemas import RawTurn, Role
from streams.kafka.rules import is_transient
from tests.bytescan import files_holding
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from workers.errors import read_pruned
from workers.forget import Source
from workers.indexer.nodes import updates_of
from workers.store import LINKS, NODES, RECORDS, SEGMENTS, TURNS, EvidenceStore, lineage
from workers.store.forget import strike_session, unlink


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)


def raw(ns: str, session: str, tid: str, text: str, emb: HashEmbedder) -> RawTurn:
    return RawTurn(
        namespace=ns,
        session_id=session,
        turn_id=tid,
        exchange_id=f"{session}:{tid}",
        seq=0,
        index=0,
        role=Role.user,
        speaker="Ann",
        text=text,
        session_date=datetime(2024, 3, 2),
        embedding=emb.embed([text])[0].tolist(),
        embedding_model=emb.model_name,
    )


def rows(store: EvidenceStore, name: str, ns: str) -> list[dict[str, Any]]:
    tbl = store.table(name)
    assert tbl is not None
    out = [r for r in tbl.to_arrow().to_pylist() if r["namespace"] == ns]
    for r in out:
        r["vector"] = np.asarray(r["vector"]).round(5).tolist()
    return sorted(out, key=lambda r: r["id"])


def fill(store: EvidenceStore, emb: HashEmbedder) -> None:
    for ns in ("a", "b"):
        store.turns.upsert(
            [
                raw(ns, "s1", "s1t0a", f"quokka{ns} sailed to the harbour", emb),
                raw(ns, "s2", "s2t1a", f"pangolin{ns} baked bread at dawn", emb),
            ]
        )
        index_batches(
            store, [batch(ns, 0, [f"Ann owns a quokka{ns} boat", "Ann is vegetarian"])], emb
        )
        index_batches(
            store,
            [batch(ns, 1, [f"Ann bakes pangolin{ns} loaves", "ann is VEGETARIAN"], session="s2")],
            emb,
        )
    store.optimize()


def test_forget_namespace_removes_every_row_and_file_and_leaves_the_other(
    store: EvidenceStore, tmp_path: Path
) -> None:
    emb = HashEmbedder()
    fill(store, emb)
    other = {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)}
    assert files_holding(tmp_path / "db", ["quokkaa", "pangolina"])  # the scan can see them

    done = store.forget("a", None, emb)

    removed = {SEGMENTS: 2, TURNS: 2, RECORDS: 3, LINKS: 0, NODES: done.rows_removed[NODES]}
    assert done.rows_removed == removed
    assert done.rows_removed[NODES] > 0 and done.versions_pruned > 0
    assert all(store.count(n, "a") == 0 for n in (TURNS, RECORDS, NODES, SEGMENTS))
    assert {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)} == other
    assert store.count(SEGMENTS, "b") == 2
    assert files_holding(tmp_path / "db", ["quokkaa", "pangolina"]) == []
    assert store.turns.search_text("a", "quokkaa", 5) == []
    assert [r["text"] for r in store.turns.search_text("b", "quokkab", 5)]  # indexes rebuilt


def test_forget_session_keeps_records_other_sessions_support(
    store: EvidenceStore, tmp_path: Path
) -> None:
    emb = HashEmbedder()
    fill(store, emb)
    other = {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)}

    done = store.forget("a", "s1", emb)

    assert done.rows_removed[TURNS] == 1 and done.rows_removed[RECORDS] == 1
    assert done.rows_removed[SEGMENTS] == 1
    assert [s["session_id"] for s in store.segments.of_session("a", "s2")] == ["s2"]
    assert store.segments.of_session("a", "s1") == []
    assert done.rows_updated[RECORDS] == 1  # "Ann is vegetarian" is also evidenced in s2
    texts = {r["normalized_text"]: r for r in rows(store, RECORDS, "a")}
    assert set(texts) == {"fact: Ann bakes pangolina loaves", "fact: Ann is vegetarian"}
    shared = texts["fact: Ann is vegetarian"]
    assert shared["segment_ids"] == ["a/s2/1"] and shared["source_session"] == "s2"
    assert shared["segment_id"] == "a/s2/1" and all(e.startswith("s2") for e in shared["evidence"])
    for node in rows(store, NODES, "a"):
        assert "quokkaa" not in node["text"] and node["session_id"] != "s1"
        assert set(node["record_ids"]) <= {r["id"] for r in texts.values()}
    assert [r["session_id"] for r in rows(store, TURNS, "a")] == ["s2"]
    assert {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)} == other
    assert files_holding(tmp_path / "db", ["quokkaa"]) == []
    assert files_holding(tmp_path / "db", ["pangolina"])  # the other session stays


def test_forget_namespace_absent_changes_nothing(store: EvidenceStore) -> None:
    emb = HashEmbedder()
    fill(store, emb)
    before = {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)}
    done = store.forget("zz", None, emb)
    assert sum(done.rows_removed.values()) == 0 and done.versions_pruned == 0
    assert {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)} == before


def test_a_reader_whose_version_a_forget_pruned_reads_the_latest_after_latest(
    store: EvidenceStore, tmp_path: Path
) -> None:
    """Another process's forget prunes the versions a lagging reader still holds: its read
    fails with an error `read_pruned` names (the stages wait it out, the query service
    searches again), and after `latest()` it reads what the forget kept."""
    emb = HashEmbedder()
    fill(store, emb)
    reader = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM, 3600.0)
    before = {n: len(rows(reader, n, "b")) for n in (TURNS, RECORDS, NODES)}
    store.forget("a", None, emb)
    with pytest.raises(RuntimeError) as raised:
        rows(reader, RECORDS, "b")
    assert read_pruned(raised.value) and is_transient(raised.value)
    assert not read_pruned(RuntimeError("lance error: Table 'records' was not found"))
    reader.latest()
    assert {n: len(rows(reader, n, "b")) for n in (TURNS, RECORDS, NODES)} == before
    assert rows(reader, RECORDS, "a") == []


def test_a_read_through_the_store_reads_again_after_a_forget_pruned_its_version(
    store: EvidenceStore, tmp_path: Path
) -> None:
    """What the client's listings and the console's pages read through: the read that
    failed above is read again at the latest versions; any other error is raised."""
    emb = HashEmbedder()
    fill(store, emb)
    reader = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM, 3600.0)
    kept = rows(reader, RECORDS, "b")
    store.forget("a", None, emb)
    assert reader.read(rows, reader, RECORDS, "b") == kept
    assert reader.read(rows, reader, RECORDS, "a") == []

    def broken() -> None:
        raise RuntimeError("lance error: Table 'records' was not found")

    with pytest.raises(RuntimeError, match="was not found"):
        reader.read(broken)


def test_strike_session_record_only_in_session_is_dropped() -> None:
    rec = {"segment_ids": ["a/s1/0", "a/s1/3"], "source_session": "s1", "evidence": ["x"]}
    assert strike_session(rec, "s1", {"x"}) is None
    assert strike_session(rec, "s2", set()) is rec


def test_strike_session_legacy_record_decided_by_source_session() -> None:
    assert strike_session({"segment_ids": [], "source_session": "s1"}, "s1", set()) is None


def test_unlink_node_without_links_left_is_dropped() -> None:
    node = {
        "label": "Ann",
        "record_ids": ["r1", "r2"],
        "record_texts": ["one", "two"],
        "session_id": "s1",
        "first_turn_id": "t",
        "last_turn_id": "u",
    }
    assert unlink(node, {"r1", "r2"}, "s1", 100) is None
    left = unlink(node, {"r1"}, "s1", 100)
    assert left is not None
    assert left["record_ids"] == ["r2"] and left["text"] == "Ann\ntwo"
    assert left["session_id"] is None and left["first_turn_id"] is None


def test_list_records_and_turns_filter_and_paginate(store: EvidenceStore) -> None:
    from workers.store.listing import list_records, list_turns

    emb = HashEmbedder()
    fill(store, emb)
    every = list_records(store.db, "a", page_size=2)
    assert every.total == 3 and len(every.items) == 2 and every.pages == 2
    assert len(list_records(store.db, "a", page=2, page_size=2).items) == 1
    assert list_records(store.db, "a", page=3, page_size=2).items == []
    s1 = list_records(store.db, "a", session_id="s1")
    assert {r["normalized_text"] for r in s1.items} == {
        "fact: Ann owns a quokkaa boat",
        "fact: Ann is vegetarian",
    }
    assert list_records(store.db, "a", memory_type="preference").total == 0
    assert "vector" not in every.items[0]
    turns = list_turns(store.db, "a")
    assert [t["session_id"] for t in turns.items] == ["s1", "s2"]
    assert (
        list_turns(store.db, "a", "s2").items[0]["text"].endswith("pangolina baked bread at dawn")
    )
    assert list_records(store.db, "nobody").total == 0
    with pytest.raises(ValueError, match="page_size"):
        list_records(store.db, "a", page_size=0)


def test_list_records_since_keeps_records_from_that_day_on(store: EvidenceStore) -> None:
    from datetime import date

    from workers.store.listing import list_records

    fill(store, HashEmbedder())
    dates = sorted(r["created_at"] for r in list_records(store.db, "a").items)
    assert dates[0] is not None
    assert list_records(store.db, "a", since=dates[0].date()).total == 3
    assert list_records(store.db, "a", since=date(2999, 1, 1)).total == 0


def test_expire_removes_turns_and_records_dated_before_the_cutoff_only(
    store: EvidenceStore, tmp_path: Path
) -> None:
    emb = HashEmbedder()
    fill(store, emb)
    old_turn = raw("a", "s9", "s9t0a", "wombata crossed the old bridge", emb).model_copy(
        update={"session_date": datetime(2020, 1, 5)}
    )
    store.turns.upsert([old_turn])
    old = batch("a", 5, ["Ann once owned a wombata farm"], session="s9")
    old = old.model_copy(
        update={
            "records": [
                r.model_copy(update={"created_at": datetime(2020, 1, 5)}) for r in old.records
            ]
        }
    )
    index_batches(store, [old], emb)
    before = {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)}

    done = store.expire(datetime(2022, 1, 1), emb)

    assert done.rows_removed[TURNS] == 1 and done.rows_removed[RECORDS] == 1
    assert store.count(TURNS, "a") == 2 and store.count(RECORDS, "a") == 3
    assert all("wombata" not in r["text"] for r in rows(store, NODES, "a"))
    assert {n: rows(store, n, "b") for n in (TURNS, RECORDS, NODES)} == before
    assert files_holding(tmp_path / "db", ["wombata"]) == []
    again = store.expire(datetime(2022, 1, 1), emb)
    assert sum(again.rows_removed.values()) == 0 and again.versions_pruned == 0


def many(ns: str, session: str, n: int, emb: HashEmbedder) -> tuple[list[RawTurn], list[str]]:
    """`n` turns long enough for Lance to compress their pages by default, and one marker
    of every 300 to look for."""
    words = ["Ann", "Bo", "sailed", "baked", "harbour", "bread", "dawn", "north", "river", "lamp"]
    texts = [
        " ".join(words[(i * 7 + j) % len(words)] for j in range(30)) + f" mark{ns}{i:05d}q"
        for i in range(n)
    ]
    turns = [raw(ns, session, f"t{i}", t, emb) for i, t in enumerate(texts)]
    return turns, [f"mark{ns}{i:05d}q" for i in range(0, n, 300)]


def seen(root: Path, needles: list[str]) -> int:
    return len({hit.split(": ")[1] for hit in files_holding(root, needles)})


def test_text_is_stored_where_a_byte_scan_can_see_it(store: EvidenceStore, tmp_path: Path) -> None:
    """Lance compresses large string pages by default; then a removed sentence could stay in
    a file unseen by the scans above. Every text column is written plain, so they can tell."""
    turns, needles = many("a", "s1", 3000, HashEmbedder())
    store.turns.upsert(turns)
    store.optimize()
    assert seen(tmp_path / "db", needles) == len(needles)


def test_repeated_text_is_stored_where_a_byte_scan_can_see_it(
    store: EvidenceStore, tmp_path: Path
) -> None:
    """A column of few distinct values is dictionary-encoded, and Lance compresses the
    dictionary unless told not to: the shared test stack's tables, holding the same sentences
    in many namespaces, hid a kept session's text from the scan that way."""
    emb = HashEmbedder()
    repeated = [
        raw("a", "s1", f"t{i}", f"the harbour lamp at dawn {i % 20}", emb) for i in range(3000)
    ]
    needles = [f"mark{i:03d}q" for i in range(5)]
    marked = [raw("a", "s2", f"m{i}", f"Ann sailed {n}", emb) for i, n in enumerate(needles)]
    store.turns.upsert(repeated + marked)
    assert seen(tmp_path / "db", needles) == len(needles)


def test_forget_rewrites_a_compressed_table_plain(store: EvidenceStore, tmp_path: Path) -> None:
    emb = HashEmbedder()
    store.db.db.create_table(TURNS, schema=store.turns.schema)  # as an earlier version did
    gone, gone_marks = many("a", "s1", 1500, emb)
    kept, kept_marks = many("b", "s1", 1500, emb)
    store.turns.upsert(gone + kept)
    assert seen(tmp_path / "db", kept_marks) < len(kept_marks)  # compressed: the scan is blind

    store.forget("a", None, emb)

    assert seen(tmp_path / "db", gone_marks) == 0
    assert seen(tmp_path / "db", kept_marks) == len(kept_marks)


def test_forget_keeps_rows_from_after_its_fence_and_removes_the_rest(
    store: EvidenceStore, tmp_path: Path
) -> None:
    """Rows the indexer wrote from exchanges sent after the forget, before it saw the
    forget, stay with what links them; older rows and rows of unknown lineage go, files too."""
    emb = HashEmbedder()
    old, new = Source(0, 3), Source(0, 12)
    store.turns.upsert(
        [
            raw("a", "s1", "t0", "quokka sailed home", emb),
            raw("a", "s2", "t1", "walrus swam north", emb),
            raw("a", "s3", "t2", "narwhal dove deep", emb),
        ],
        [old, new, None],
    )
    batches = [
        batch("a", 0, ["Ann owns a quokka boat"]),
        batch("a", 1, ["Ann saw a walrus"], session="s2"),
    ]
    store.upsert_batches(batches, updates_of(batches), emb, [old, new])
    ann = [n for n in rows(store, NODES, "a") if len(n["record_ids"]) == 2]
    assert ann  # a node linking both records (entity Ann, tag travel)

    done = store.forget("a", None, emb, {0: 10})

    assert done.rows_removed[TURNS] == 2 and done.rows_removed[RECORDS] == 1
    assert [r["text"] for r in rows(store, TURNS, "a")] == ["Ann: walrus swam north"]
    (kept,) = rows(store, RECORDS, "a")
    assert kept["normalized_text"] == "fact: Ann saw a walrus"
    nodes = rows(store, NODES, "a")
    assert nodes and all(n["record_ids"] == [kept["id"]] for n in nodes)
    assert files_holding(tmp_path / "db", ["quokka", "narwhal"]) == []
    assert files_holding(tmp_path / "db", ["walrus"])


def test_forget_session_keeps_its_turns_and_records_from_after_the_fence(
    store: EvidenceStore,
) -> None:
    emb = HashEmbedder()
    store.turns.upsert(
        [
            raw("a", "s1", "t0", "quokka sailed home", emb),
            raw("a", "s1", "t1", "walrus swam north", emb),
            raw("a", "s2", "t2", "narwhal dove deep", emb),
        ],
        [Source(0, 3), Source(0, 12), Source(0, 4)],
    )
    batches = [batch("a", 0, ["Ann owns a quokka boat"]), batch("a", 1, ["Ann saw a walrus"])]
    store.upsert_batches(batches, updates_of(batches), emb, [Source(0, 3), Source(0, 12)])
    store.forget("a", "s1", emb, {0: 10})
    assert [r["turn_id"] for r in rows(store, TURNS, "a")] == ["t1", "t2"]
    assert [r["normalized_text"] for r in rows(store, RECORDS, "a")] == ["fact: Ann saw a walrus"]


def test_lineage_merge_is_order_free_and_predates_any_old_or_unknown_part() -> None:
    a, b, c = ["0:9", "1:4"], ["0:3"], [lineage.token(None)]
    assert lineage.merge(a, b) == lineage.merge(b, a) == ["0:3", "1:4"]
    assert lineage.merge(a, c, b) == ["", "0:3", "1:4"]
    assert not lineage.predates(["0:12", "1:5"], {0: 10, 1: 5})
    assert lineage.predates(["0:12", "1:4"], {0: 10, 1: 5})
    assert lineage.predates([""], {0: 10}) and lineage.predates(None, {0: 10})
    assert lineage.predates(["0:12"], None)  # no fence: a forget of everything
    assert not lineage.predates(["2:0"], {0: 10})  # a partition the fence did not know


def test_forget_session_leaves_node_vectors_as_if_it_had_never_been_written(
    tmp_path: Path,
) -> None:
    emb = HashEmbedder()
    both = EvidenceStore(str(tmp_path / "both"), HashEmbedder.model_name, HASH_DIM)
    only = EvidenceStore(str(tmp_path / "only"), HashEmbedder.model_name, HASH_DIM)
    first = batch("a", 0, ["Ann owns a quokka boat", "Ann rows at dawn"])
    second = batch("a", 1, ["Ann bakes rye loaves"], session="s2")
    index_batches(both, [first], emb)
    index_batches(both, [second], emb)
    index_batches(only, [second], emb)

    both.forget("a", "s1", emb)

    def vectors(store: EvidenceStore) -> dict[str, list[float]]:
        return {r["id"]: r["vector"] for r in rows(store, NODES, "a")}

    kept, fresh = vectors(both), vectors(only)
    assert kept.keys() == fresh.keys()
    for node, vec in fresh.items():  # its head was the removed records: made again without them
        assert np.allclose(kept[node], vec, atol=1e-6), node


def test_list_records_of_one_day_come_in_the_order_they_were_said(store: EvidenceStore) -> None:
    """Oldest first within a day too: by where each record's first turn sits in its session,
    not by the records' ids (digests)."""
    from workers.store.listing import list_records

    emb = HashEmbedder()
    said = [raw("o", "s1", f"s1t{i}a", f"line {i} of the day", emb) for i in range(6)]
    store.turns.upsert([t.model_copy(update={"seq": i}) for i, t in enumerate(said)])
    index_batches(store, [batch("o", i, [f"Ann said thing {i}"]) for i in (3, 0, 5, 1, 4, 2)], emb)
    listed = [r["semantic_text"] for r in list_records(store.db, "o").items]
    assert listed == [f"Ann said thing {i}" for i in range(6)]
