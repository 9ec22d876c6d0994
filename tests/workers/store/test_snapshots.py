"""Small namespaces read from memory answer as LanceDB does, and never outlive a write."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.waiting import wait_until
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from tests.workers.store.test_forget import raw
from workers.store import NODES, RECORDS, TURNS, EvidenceStore, consistent_reads, fulltext
from workers.store.snapshots import EVERY, Snapshot, Written, _best

TEXTS = [
    "Ann booked a trip to Lisbon",
    "Ann likes tiled houses in Lisbon",
    "Ben adopted a grey cat",
    "Ben trains for a half marathon",
    "Ann bakes sourdough on Sundays",
    "Ben's cat is called Ash",
]


@pytest.fixture
def emb() -> HashEmbedder:
    return HashEmbedder()


def stores(path: Path, emb: HashEmbedder) -> tuple[EvidenceStore, EvidenceStore]:
    """The same directory read from LanceDB and from snapshots, filled with two namespaces."""
    plain = EvidenceStore(str(path), emb.model_name, HASH_DIM)
    for ns in ("a", "b"):
        index_batches(plain, [batch(ns, i, [f"{t} ({ns})"]) for i, t in enumerate(TEXTS)], emb)
        plain.turns.upsert(
            [raw(ns, f"s{i % 2}", f"t{i}", f"{t} ({ns})", emb) for i, t in enumerate(TEXTS)]
        )
    return plain, EvidenceStore(str(path), emb.model_name, HASH_DIM, snapshot_rows=1000)


def same(a: list[dict], b: list[dict]) -> None:  # type: ignore[type-arg]
    assert [r["id"] for r in a] == [r["id"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert {k: v for k, v in x.items() if k[0] != "_"} == {
            k: v for k, v in y.items() if k[0] != "_"
        }
        if "_distance" in x:
            assert abs(x["_distance"] - y["_distance"]) < 1e-5
        if "_score" in x:
            assert x["_score"] == pytest.approx(y["_score"])


def test_snapshot_reads_answer_as_lancedb_does(tmp_path: Path, emb: HashEmbedder) -> None:
    plain, snap = stores(tmp_path / "db", emb)
    vecs = emb.embed(["Lisbon trip", "grey cat"])
    for got, want in [
        (snap.records.search_vectors("a", vecs, 4), plain.records.search_vectors("a", vecs, 4)),
        (snap.nodes.search_vectors("a", vecs, 5), plain.nodes.search_vectors("a", vecs, 5)),
        (
            snap.nodes.search_vectors("a", vecs, 5, ["entity"]),
            plain.nodes.search_vectors("a", vecs, 5, ["entity"]),
        ),
        (snap.nodes.search_vectors("a", vecs, 5, []), plain.nodes.search_vectors("a", vecs, 5, [])),
        (snap.turns.search_vectors("b", vecs, 3), plain.turns.search_vectors("b", vecs, 3)),
        (
            snap.turns.search_vectors("b", vecs, 9, "s1"),
            plain.turns.search_vectors("b", vecs, 9, "s1"),
        ),
    ]:
        assert len(got) == 2
        for g, w in zip(got, want, strict=True):
            same(g, w)
    # full text: the same rows, scored within the namespace (tests/workers/store/test_fulltext.py)
    for got, want in [
        (
            snap.records.search_text("a", "marathon", 3),
            plain.records.search_text("a", "marathon", 3),
        ),
        (snap.turns.search_text("b", "cat", 5, "s0"), plain.turns.search_text("b", "cat", 5, "s0")),
    ]:
        assert [r["id"] for r in got] == [r["id"] for r in want] and got
        assert [{k: v for k, v in r.items() if k[0] != "_"} for r in got] == [
            {k: v for k, v in r.items() if k[0] != "_"} for r in want
        ]
    ids = [r["id"] for r in plain.records.search_vectors("b", vecs, 6)[0]]
    assert [r["id"] for r in snap.records.by_ids("b", ids + ["none"])] == ids
    assert [r["id"] for r in snap.records.by_ids("a", ids)] == []  # another namespace's ids
    spans = [("s1", 0, 0), ("s0", 0, 0)]
    assert sorted(r["id"] for r in snap.turns.near("a", spans)) == sorted(
        r["id"] for r in plain.turns.near("a", spans)
    )
    assert snap.nodes.temporal("a") == plain.nodes.temporal("a")
    assert snap.db.snapshots is not None and plain.db.snapshots is None
    held = set(snap.db.snapshots._entries)  # what was read, no more
    assert held == {(RECORDS, "a"), (RECORDS, "b"), (NODES, "a"), (TURNS, "a"), (TURNS, "b")}


def test_turns_near_spans_are_the_rows_lancedb_finds_in_table_order(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    seqs = [5, 0, 3, 1, 4, 2, 2, 7]  # written out of order, a position held by two turns
    plain.turns.upsert(
        [
            raw("a", f"s{i % 2}", f"t{i}", t, emb).model_copy(update={"seq": seq})
            for i, (t, seq) in enumerate(zip([*TEXTS, "one more", "the last"], seqs, strict=True))
        ]
        + [raw("b", "s0", "t0", "another tenant", emb)]
    )
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    for spans in [
        [("s0", 0, 2)],
        [("s1", -1, 1), ("s0", 4, 9)],
        [("s0", 1, 5), ("s0", 3, 7)],  # overlapping: each turn once
        [("s9", 0, 9), ("s1", 6, 9)],  # no such session; a span past its turns
        [("s1", 3, 3)],
    ]:
        want = [r["id"] for r in plain.turns.near("a", spans)]
        assert [r["id"] for r in snap.turns.near("a", spans)] == want, spans
    assert len(snap.turns.near("a", [("s0", -5, 99), ("s1", -5, 99)])) == 8


def test_a_write_is_read_at_once_and_a_forget_leaves_no_snapshot_of_its_text(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain, snap = stores(tmp_path / "db", emb)
    vec = emb.embed(["a violin lesson"])
    assert (
        snap.records.search_vectors("a", vec, 1)[0][0]["semantic_text"]
        != "Ann took a violin lesson"
    )
    index_batches(plain, [batch("a", 9, ["Ann took a violin lesson"])], emb)  # another process
    assert (
        snap.records.search_vectors("a", vec, 1)[0][0]["semantic_text"]
        == "Ann took a violin lesson"
    )
    assert (
        snap.records.search_text("a", "violin", 1)[0]["semantic_text"] == "Ann took a violin lesson"
    )
    snap.records.search_vectors("b", vec, 1)
    plain.forget("a", None, emb)
    assert snap.records.search_vectors("a", vec, 3) == [[]]
    assert snap.db.snapshots is not None
    held = snap.db.snapshots._entries
    assert ("records", "b") not in held  # dropped with the version it was read at
    assert not any("violin" in str(s.data.to_pylist()) for s in held.values())


def test_a_write_carries_the_full_text_index_over_and_scores_as_one_built_afresh(
    tmp_path: Path, emb: HashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, snap = stores(tmp_path / "db", emb)
    analyzed: list[int] = []
    postings = fulltext._postings

    def counted(column: Any, vocab: dict[str, int] | None = None) -> Any:
        analyzed.append(len(column))
        return postings(column, vocab)

    monkeypatch.setattr(fulltext, "_postings", counted)

    def scores(store: EvidenceStore, query: str) -> dict[str, float]:
        return {r["id"]: r["_score"] for r in store.turns.search_text("a", query, 20)}

    def afresh(query: str) -> dict[str, float]:
        return scores(
            EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000), query
        )

    assert scores(snap, "cat Lisbon") and analyzed == [len(TEXTS)]
    plain.turns.upsert([raw("a", "s0", "t9", "a cat in Lisbon, with a violin (a)", emb)])
    # and one row's text changed under the store, as a migration rewrites rows (its upsert
    # refuses other words under a stored turn id)
    tbl = plain.table(TURNS)
    assert tbl is not None
    tbl.update(where="turn_id = 't0'", values={"text": "Ann cancelled the trip (a)"})
    analyzed.clear()
    for query in ["cat Lisbon", "violin", "trip", "sourdough Sundays"]:
        got = scores(snap, query)
        assert got and got == afresh(query), query  # the same floats
    assert analyzed[0] == 2  # the carried index analyzed only the new and the changed text
    plain.forget("a", "s1", emb)  # rows deleted: their terms leave the index
    assert scores(snap, "marathon") == {} and scores(snap, "violin") == afresh("violin")
    held = snap.db.snapshots._entries if snap.db.snapshots is not None else {}
    vocab = held[TURNS, "a"]._text["text"]._vocab
    assert "marathon" not in vocab and "violin" in vocab


def test_a_consistent_block_checks_a_tables_version_once_and_the_next_block_sees_a_write(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain, snap = stores(tmp_path / "db", emb)
    vec = emb.embed(["a violin lesson"])

    def top() -> str:
        return str(snap.records.search_vectors("a", vec, 1)[0][0]["semantic_text"])

    async def request() -> tuple[str, str]:
        with consistent_reads():
            first = top()
            index_batches(plain, [batch("a", 9, ["Ann took a violin lesson"])], emb)
            return first, await asyncio.to_thread(top)  # the request's worker threads too

    first, again = asyncio.run(request())
    assert first != "Ann took a violin lesson" and again == first
    assert top() == "Ann took a violin lesson"
    with consistent_reads():
        assert top() == "Ann took a violin lesson"


def marked(snap: EvidenceStore, vec: np.ndarray) -> tuple[Any, Callable[[str, Written], str]]:
    """The snapshots `snap` holds, and the best record's text for `vec` in a namespace, read
    as a request that knows the marks it is given."""
    assert snap.db.snapshots is not None

    def top(ns: str, marks: Written) -> str:
        with consistent_reads(marks):
            return str(snap.records.search_vectors(ns, vec, 1)[0][0]["semantic_text"])

    return snap.db.snapshots._entries, top


def test_a_namespace_marked_as_last_written_keeps_its_snapshot_through_other_writes(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain, snap = stores(tmp_path / "db", emb)
    vec = emb.embed(["a violin lesson"])
    held, read = marked(snap, vec)
    marks = {(RECORDS, ns): plain.versions([RECORDS])[RECORDS] for ns in ("a", "b")}

    def top(ns: str) -> str:
        return read(ns, marks)

    top("a")
    kept = held[(RECORDS, "a")]
    index_batches(plain, [batch("b", 9, ["Ben took a violin lesson"])], emb)
    marks[(RECORDS, "b")] = plain.versions([RECORDS])[RECORDS]
    assert top("b") == "Ben took a violin lesson"
    assert top("a") != "Ann took a violin lesson" and held[(RECORDS, "a")] is kept
    with consistent_reads():  # without marks a read compares the table's version
        snap.records.search_vectors("a", vec, 1)
    assert held[(RECORDS, "a")] is not kept

    index_batches(plain, [batch("a", 9, ["Ann took a violin lesson"])], emb)
    marks[(RECORDS, "a")] = plain.versions([RECORDS])[RECORDS]
    assert top("a") == "Ann took a violin lesson"
    plain.forget("a", None, emb)  # marked as a write to every namespace, as the indexer does
    forgot = plain.versions([RECORDS])[RECORDS]
    marks.update({(RECORDS, EVERY): forgot, (RECORDS, "b"): forgot})
    top("b")  # a read of another namespace: the forgotten one's snapshot goes
    assert (RECORDS, "a") not in held
    assert not any("Ann took" in str(s.data.to_pylist()) for s in held.values())
    marks[(RECORDS, "a")] = forgot
    with consistent_reads(marks):
        assert snap.records.search_vectors("a", vec, 3) == [[]]


def test_a_mark_past_the_tables_versions_leaves_the_reads_to_the_versions(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    """A store replaced under a Redis that kept its marks: read right, and not at every read."""
    plain, snap = stores(tmp_path / "db", emb)
    held, read = marked(snap, emb.embed(["a violin lesson"]))
    ahead = {(RECORDS, "a"): plain.versions([RECORDS])[RECORDS] + 1_000}

    def top() -> str:
        return read("a", ahead)

    top()
    kept = held[(RECORDS, "a")]
    assert top() != "Ann took a violin lesson" and held[(RECORDS, "a")] is kept
    index_batches(plain, [batch("a", 9, ["Ann took a violin lesson"])], emb)
    assert top() == "Ann took a violin lesson"


def test_snapshots_are_evicted_past_their_row_budget(tmp_path: Path, emb: HashEmbedder) -> None:
    plain, _ = stores(tmp_path / "db", emb)
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=8)
    vec = emb.embed(["cat"])
    snap.turns.search_vectors("a", vec, 1)
    snap.turns.search_vectors("b", vec, 1)
    assert snap.db.snapshots is not None
    assert list(snap.db.snapshots._entries) == [(TURNS, "b")]  # 6 rows each, 8 at most


def test_a_namespace_too_large_for_exact_search_is_read_from_lancedb(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    stores(tmp_path / "db", emb)
    snap = EvidenceStore(
        str(tmp_path / "db"), emb.model_name, HASH_DIM, exact_max_rows=5, snapshot_rows=1000
    )
    got = snap.turns.search_vectors("a", np.asarray(emb.embed(["cat"])), 2)
    assert len(got[0]) == 2
    assert snap.db.snapshots is not None and not snap.db.snapshots._entries


class Counting:
    """A table at a version of the test's choosing whose full reads are counted and held
    until `arrived()` holds, and whose version is counted as it is looked at (each caller of
    `SnapshotCache.get` looks on entering it, the reader once more before it reads)."""

    def __init__(self, tbl: Any, version: int, reads: list[int], looks: list[int]) -> None:
        self.tbl, self._version, self.reads, self.looks = tbl, version, reads, looks
        self.arrived: Callable[[], bool] = lambda: True

    @property
    def version(self) -> int:
        self.looks.append(self._version)
        return self._version

    def search(self, *args: object) -> object:
        self.reads.append(self._version)
        wait_until(self.arrived, what="the other callers in the cache", timeout_s=30)
        return self.tbl.search(*args)


def test_threads_missing_one_snapshot_read_it_once(tmp_path: Path, emb: HashEmbedder) -> None:
    """After a write, a burst of concurrent searches reads the namespace once, not once each."""
    _, snap = stores(tmp_path / "db", emb)
    tbl, cache = snap.table(TURNS), snap.db.snapshots
    assert tbl is not None and cache is not None
    reads: list[int] = []
    looks: list[int] = []
    table = Counting(tbl, tbl.version, reads, looks)
    table.arrived = lambda: len(looks) >= 8 + 1  # every caller in, while the first one reads
    with ThreadPoolExecutor(8) as pool:
        got = list(
            pool.map(
                lambda _: cache.get(table, TURNS, "a", lambda: ["id"], "namespace = 'a'"), range(8)
            )
        )
    assert len(reads) == 1 and all(g is got[0] for g in got) and got[0].rows == 6


def test_a_newer_version_waiting_behind_an_older_read_reads_again(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    _, snap = stores(tmp_path / "db", emb)
    tbl, cache = snap.table(TURNS), snap.db.snapshots
    assert tbl is not None and cache is not None
    reads: list[int] = []
    looks: list[int] = []
    old, new = Counting(tbl, 1, reads, looks), Counting(tbl, 2, reads, looks)
    old.arrived = lambda: 2 in looks  # the newer caller is in while the older one reads
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(cache.get, old, TURNS, "a", lambda: ["id"], "namespace = 'a'")
        wait_until(lambda: reads, what="the older caller reading")
        second = pool.submit(cache.get, new, TURNS, "a", lambda: ["id"], "namespace = 'a'")
        assert (first.result().version, second.result().version) == (1, 2)
    assert reads == [1, 2]
    assert cache.get(old, TURNS, "a", lambda: ["id"], "") is second.result()  # not older


def warm(store: EvidenceStore, namespace: str) -> None:
    for table in store.warmers(namespace):
        table()


@pytest.mark.parametrize("at_once", [False, True], ids=["in turn", "tables at once"])
def test_warming_reads_what_the_searches_read_and_builds_their_text_indexes(
    tmp_path: Path, emb: HashEmbedder, at_once: bool
) -> None:
    _, snap = stores(tmp_path / "db", emb)
    unwarmed = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    cache = snap.db.snapshots
    assert cache is not None
    if at_once:  # as the query service runs them
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda warm: warm(), snap.warmers("a")))
    else:
        warm(snap, "a")
    warmed = dict(cache._entries)
    assert set(warmed) == {(NODES, "a"), (RECORDS, "a"), (TURNS, "a")}  # not the other one
    assert all(s._text for s in warmed.values())  # each table's full-text index, built
    vec = np.asarray(emb.embed(["grey cat"]))
    for store in (snap, unwarmed):  # the same answers as a store that was not warmed
        assert store.turns.search_text("a", "cat", 5) == unwarmed.turns.search_text("a", "cat", 5)
        assert store.nodes.search_text("a", "cat", 5) == unwarmed.nodes.search_text("a", "cat", 5)
        assert store.records.search_vectors("a", vec, 3) == unwarmed.records.search_vectors(
            "a", vec, 3
        )
    assert cache._entries == warmed  # the searches read nothing more
    assert all(s._text.keys() == warmed[k]._text.keys() for k, s in cache._entries.items())
    warm(snap, "none")  # a namespace with no rows: an empty snapshot, no error
    warm(EvidenceStore(str(tmp_path / "empty"), emb.model_name, HASH_DIM, snapshot_rows=9), "a")


def test_turn_positions_read_from_memory_and_from_lancedb_agree(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    plain.turns.upsert(
        [raw("a", "s1", f"t{i}", t, emb).model_copy(update={"seq": i}) for i, t in enumerate(TEXTS)]
    )
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    asked = [("s1", "t4"), ("s1", "t1"), ("s2", "t1"), ("s1", "none")]
    want = {("s1", "t4"): 4, ("s1", "t1"): 1}  # another session's or an unknown turn: absent
    assert plain.turns.seqs("a", asked) == want == snap.turns.seqs("a", asked)
    assert snap.turns.seqs("b", asked) == {} == plain.turns.seqs("a", [])


def test_who_said_a_turn_reads_from_memory_and_from_lancedb_alike(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    said = {"t0": "Lea", "t1": "Omar", "t2": None}
    plain.turns.upsert(
        [
            raw("a", "s1", t, f"turn {t}", emb).model_copy(update={"speaker": w})
            for t, w in said.items()
        ]
    )
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    asked = [("s1", "t1"), ("s1", "t0"), ("s1", "t2"), ("s2", "t0")]
    want = {("s1", "t1"): "Omar", ("s1", "t0"): "Lea"}  # no name, another session: absent
    assert plain.turns.speakers("a", asked) == want == snap.turns.speakers("a", asked)
    assert snap.turns.speakers("b", asked) == {}


def test_a_namespaces_speaker_names_read_from_memory_and_from_lancedb_alike(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    said = [("a", "t0", "Omar"), ("a", "t1", None), ("a", "t2", "Lea"), ("b", "t0", "Ines")]
    plain.turns.upsert(
        [raw(ns, "s1", t, f"turn {t}", emb).model_copy(update={"speaker": w}) for ns, t, w in said]
    )
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    assert plain.turns.names("a") == ["Lea", "Omar"] == snap.turns.names("a")  # none: absent
    assert plain.turns.names("c") == [] == snap.turns.names("c")
    plain.turns.upsert([raw("a", "s2", "t9", "later", emb).model_copy(update={"speaker": "Kai"})])
    assert plain.turns.names("a") == ["Kai", "Lea", "Omar"] == snap.turns.names("a")  # a write


def test_the_best_scores_come_in_a_stable_sorts_order_ties_included() -> None:
    rng = np.random.default_rng(0)
    for trial in range(2000):
        n, limit = int(rng.integers(0, 60)), int(rng.integers(1, 70))
        if trial % 2:  # few distinct values: ties at the cut
            scores = rng.integers(0, 5, n).astype(np.float32) / 4
        else:
            scores = rng.random(n).astype(np.float32)
        assert _best(scores, limit).tolist() == np.argsort(-scores, kind="stable")[:limit].tolist()


def test_column_names_are_read_once_per_consistent_reads_block(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    from workers.store.snapshots import column_names

    plain, snap = stores(tmp_path / "db", emb)
    reader = snap.turns.table()
    writer = plain.turns.table()
    assert reader is not None and writer is not None

    async def request() -> tuple[frozenset[str], frozenset[str]]:
        with consistent_reads():
            first = column_names(reader, TURNS)
            writer.add_columns({"extra": "''"})
            return first, await asyncio.to_thread(column_names, reader, TURNS)

    first, again = asyncio.run(request())
    assert "text" in first and "extra" not in first and again == first
    assert "extra" in column_names(reader, TURNS)  # outside a block: read at each call
    with consistent_reads():
        assert "extra" in column_names(reader, TURNS)


def test_a_row_without_a_finite_direction_scores_0_and_spoils_no_other() -> None:
    """A vector the contract would refuse (written before it did, or by hand) scores 0
    instead of NaN, which would make every reply of its namespace unreadable."""
    rows = [[3.0, 4.0], [np.inf, 1.0], [0.0, 0.0], [3e38, 3e38]]
    data = pa.table(
        {"id": ["a", "b", "c", "d"], "vector": pa.array(rows, type=pa.list_(pa.float32(), 2))}
    )
    with np.errstate(all="raise"):  # no warning either
        unit = Snapshot.of(1, data).unit
    assert unit.dtype == np.float32 and np.isfinite(unit).all()
    assert np.allclose(unit, [[0.6, 0.8], [0, 0], [0, 0], [0, 0]])
