"""The evidence store on a real LanceDB directory."""

from __future__ import annotations

import pathlib

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from tests.processes import run_together
from tests.workers.builders import TOY_DIM, turn
from workers.store import TURNS, EmbeddingMismatch, EvidenceStore
from workers.store.arrow import ID
from workers.store.errors import TurnReplaced
from workers.store.listing import list_turns
from workers.store.turns import _turn_row, turn_row_id, turns_schema


@pytest.fixture
def store(tmp_path) -> EvidenceStore:  # type: ignore[no-untyped-def]
    return EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)


def test_store_upsert_is_idempotent_on_turn_ids(store: EvidenceStore) -> None:
    batch = [turn("a", "t1", "sourdough starter doubled", 0), turn("a", "t2", "half marathon", 1)]
    store.turns.upsert(batch)
    store.turns.upsert(batch)
    assert store.count("turns") == 2
    hits = store.turns.search_text("a", "marathon", 5)
    assert [h["turn_id"] for h in hits] == ["t2"]


def test_store_refuses_other_words_under_a_stored_turn_id(store: EvidenceStore) -> None:
    store.turns.upsert([turn("a", "t2", "half marathon", 1)])
    forged = turn("a", "t2", "the marathon was cancelled", 1)
    with pytest.raises(TurnReplaced, match="'t2' of a/s1 is stored with other words"):
        store.turns.upsert([turn("a", "t3", "a new turn", 2), forged])
    assert store.turns.search_text("a", "cancelled", 5) == []  # nothing of the batch written
    assert store.count("turns") == 1
    for change in ({"speaker": None}, {"image_caption": "a photo"}, {"memory": False}):
        with pytest.raises(TurnReplaced):
            store.turns.upsert([turn("a", "t2", "half marathon", 1).model_copy(update=change)])
    # the same words under another exchange: the same turn, as the gateway takes it
    moved = turn("a", "t2", "half marathon", 1).model_copy(update={"exchange_id": "s1:other"})
    store.turns.upsert([moved])
    assert store.count("turns") == 1


def test_store_refuses_two_sayings_of_one_turn_id_in_one_batch(store: EvidenceStore) -> None:
    """Two messages of one batch under one id: the later would replace the first unseen."""
    first, forged = turn("a", "t0", "raw turn zero", 0), turn("a", "t0", "other words", 0)
    with pytest.raises(TurnReplaced, match="'t0' of a/s1 comes twice in one batch with other"):
        store.turns.upsert([first, forged])
    assert store.count("turns") == 0  # nothing of the batch written
    store.turns.upsert([first, first])  # a redelivery in the same batch: one row
    assert store.count("turns") == 1


def test_store_same_turn_id_in_two_namespaces_is_two_rows(store: EvidenceStore) -> None:
    store.turns.upsert([turn("a", "t1", "x one", 0), turn("b", "t1", "x two", 0)])
    assert store.count("turns") == 2
    assert store.count("turns", "a") == 1


def test_store_reads_never_cross_namespaces(store: EvidenceStore) -> None:
    store.turns.upsert(
        [turn("a", "t1", "secret lisbon trip", 0), turn("b", "t2", "lisbon trip plans", 0)]
    )
    q = np.eye(TOY_DIM, dtype=np.float32)[0]
    assert {h["namespace"] for h in store.turns.search_vectors("b", q[None, :], 10)[0]} == {"b"}
    assert {h["namespace"] for h in store.turns.search_text("b", "secret lisbon", 10)} == {"b"}
    # a namespace that tries to widen the filter matches nothing
    assert store.turns.search_text("b' OR '1'='1", "lisbon", 10) == []


def test_store_session_filter(store: EvidenceStore) -> None:
    store.turns.upsert([turn("a", "t1", "lisbon", 0, "s1"), turn("a", "t2", "lisbon", 0, "s2")])
    hits = store.turns.search_text("a", "lisbon", 10, session_id="s2")
    assert [h["turn_id"] for h in hits] == ["t2"]


def test_store_refuses_another_embedding_model(store: EvidenceStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store.turns.upsert([turn("a", "t1", "x", 0)])
    other = EvidenceStore(str(tmp_path / "db"), "other-model", TOY_DIM)
    with pytest.raises(EmbeddingMismatch, match="toy"):
        other.table("turns")
    with pytest.raises(EmbeddingMismatch):
        store.turns.upsert(
            [turn("a", "t9", "x", 0).model_copy(update={"embedding_model": "other"})]
        )


def test_store_new_rows_searchable_before_optimize(store: EvidenceStore) -> None:
    store.turns.upsert([turn("a", "t1", "first row", 0)])  # creates the indexes
    store.turns.upsert([turn("a", "t2", "kayak on the river", 1)])  # not yet in the FTS index
    assert [h["turn_id"] for h in store.turns.search_text("a", "kayak", 5)] == ["t2"]
    store.optimize()
    assert [h["turn_id"] for h in store.turns.search_text("a", "kayak", 5)] == ["t2"]


def test_store_finds_its_tables_among_many(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # lancedb's deprecated table_names() lists one page of 10: the 13th table went missing
    db = lancedb.connect(str(tmp_path / "db"))
    for i in range(12):
        db.create_table(f"a{i:02d}", schema=pa.schema([("x", pa.int64())]))
    EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM).turns.upsert([turn("a", "t1", "hello", 0)])
    fresh = EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)
    assert fresh.table(TURNS) is not None and fresh.count(TURNS) == 1


def test_turns_table_listed_before_its_first_commit_reads_as_absent(tmp_path: pathlib.Path) -> None:
    # another process is creating the table: its directory is listed, no version committed yet
    (tmp_path / "db" / "turns.lance" / "_versions").mkdir(parents=True)
    store = EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)
    assert store.table(TURNS) is None
    vectors = np.zeros((1, TOY_DIM), dtype=np.float32)
    assert store.turns.search_vectors("ns", vectors, 5) == [[]]


WRITER = """
import sys
from pathlib import Path
from tests.processes import run_together
from tests.waiting import wait_until
from tests.workers.builders import TOY_DIM, turn
from workers.store import EvidenceStore
path, who, gate = sys.argv[1], sys.argv[2], Path(sys.argv[3])
store = EvidenceStore(path, "toy", TOY_DIM)
store.turns.table(create=True)
(gate / who).touch()  # loaded; both write at once
wait_until(lambda: len(list(gate.iterdir())) == 2, what="both writers loaded", timeout_s=120)
for i in range(6):  # four ids of its own and one both writers insert, each round
    store.turns.upsert([turn("a", f"t{who}{i}{j}", "own", j) for j in range(4)]
                       + [turn("a", f"t9{i}", "shared", 5)])
"""


def test_two_writer_processes_inserting_the_same_new_ids_store_each_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Lance finds no conflict between two commits that each add a fragment with the same new
    id unless `id` is declared the primary key: before it was, most shared ids were stored
    twice (a rebalance hands a batch to a second indexer while the first still writes it)."""
    path = str(tmp_path / "db")
    EvidenceStore(path, "toy", TOY_DIM).turns.table(create=True)
    gate = tmp_path / "loaded"  # each writer marks itself loaded here, then waits for both
    gate.mkdir()
    assert run_together(WRITER, [path, "1", str(gate)], [path, "2", str(gate)]) == [0, 0]
    ids = lancedb.connect(path).open_table(TURNS).to_arrow()["id"].to_pylist()
    assert len(ids) == len(set(ids)) == 2 * 6 * 4 + 6


def test_a_table_from_before_the_primary_key_takes_writes_and_gets_it_at_its_rewrite(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    path = str(tmp_path / "db")
    old = turns_schema(TOY_DIM, "toy")
    old = old.set(old.get_field_index("id"), pa.field("id", pa.string()))
    lancedb.connect(path).create_table(TURNS, schema=old)
    store = EvidenceStore(path, "toy", TOY_DIM)
    store.turns.upsert([turn("a", "t1", "sourdough", 0), turn("b", "t2", "marathon", 1)])
    assert store.count("turns") == 2
    store.forget("a")
    schema = lancedb.connect(path).open_table(TURNS).schema
    assert not schema.field("id").nullable
    assert ID.metadata.items() <= (schema.field("id").metadata or {}).items()
    store = EvidenceStore(path, "toy", TOY_DIM)
    store.turns.upsert([turn("b", "t2", "marathon", 1), turn("b", "t3", "bread", 2)])
    assert store.count("turns") == 2


def test_an_id_stored_twice_is_stored_once_by_the_next_write_of_it(store: EvidenceStore) -> None:
    """What two writers can leave behind when Lance misses their conflict (lance#9238)."""
    store.turns.upsert([turn("a", "t1", "first row", 0)])
    tbl = store.table(TURNS)
    assert tbl is not None
    tbl.add(tbl.to_arrow())  # the same id, a second time, as a concurrent insert leaves it
    assert tbl.count_rows() == 2
    store.turns.upsert([turn("a", "t1", "first row", 0), turn("a", "t2", "second", 1)])
    ids = tbl.to_arrow()["id"].to_pylist()
    assert len(ids) == len(set(ids)) == 2


def earlier_table(tmp_path: pathlib.Path, without: str) -> pa.Schema:
    """A turns table as a version before column `without` created it; its schema."""
    old = pa.schema([f for f in turns_schema(TOY_DIM, "toy") if f.name != without])
    old = old.with_metadata(turns_schema(TOY_DIM, "toy").metadata)
    lancedb.connect(str(tmp_path / "db")).create_table(TURNS, schema=old)
    return old


def test_turns_table_of_an_earlier_version_gains_passages_when_written(
    tmp_path: pathlib.Path,
) -> None:
    earlier_table(tmp_path, "passages")
    store = EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)
    store.turns.upsert([turn("ns", "t1", "short", 0)])
    assert [r["text"] for r in store.turns.near("ns", [("s1", 1, 1)])] == ["Ann: short"]
    store.turns.passage_tokens = 20
    long = " ".join(f"Sentence {i} says something here." for i in range(30))
    store.turns.upsert([turn("ns", "t2", long, 0)])
    rows = {r["turn_id"]: r for r in store.turns.near("ns", [("s1", 1, 2)])}
    assert rows["t1"]["passages"] == "" and rows["t2"]["passages"].startswith("[[0,")


@pytest.mark.parametrize(
    ("snapshot_rows", "exact_max_rows"),
    [(10_000, 10_000), (0, 10_000), (0, 0)],  # in memory; LanceDB's exact search; its ANN path
)
def test_a_turn_that_is_not_memory_is_listed_and_never_searched(
    tmp_path: pathlib.Path, snapshot_rows: int, exact_max_rows: int
) -> None:
    store = EvidenceStore(
        str(tmp_path / "db"),
        "toy",
        TOY_DIM,
        exact_max_rows=exact_max_rows,
        snapshot_rows=snapshot_rows,
    )
    said = turn("a", "t1", "the kayak club meets on thursdays", 0)
    tool = turn("a", "t2", "kayak club harbour pier", 0).model_copy(
        update={"memory": False, "speaker": "agents-item"}
    )
    store.turns.upsert([said, tool])
    q = np.eye(TOY_DIM, dtype=np.float32)[0]
    assert [h["turn_id"] for h in store.turns.search_vectors("a", q[None, :], 10)[0]] == ["t1"]
    assert [h["turn_id"] for h in store.turns.search_text("a", "kayak harbour", 10)] == ["t1"]
    assert [r["turn_id"] for r in store.turns.near("a", [("s1", 1, 2)])] == ["t1"]
    assert store.turns.names("a") == ["Ann"]  # the planner is not told of a tool's speaker
    listed = list_turns(store.db, "a")
    assert [(r["turn_id"], r["memory"]) for r in listed.items] == [("t1", True), ("t2", False)]


def test_turns_of_a_table_from_before_the_memory_column_are_all_memory(
    tmp_path: pathlib.Path,
) -> None:
    old = earlier_table(tmp_path, "memory")
    store = EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)
    row = _turn_row(turn_row_id("a", "s1", "t1"), turn("a", "t1", "x", 0), None, 400)
    rows = [{k: v for k, v in row.items() if k != "memory"}]
    store.db.table(TURNS).add(pa.Table.from_pylist(rows, schema=old))
    assert [h["turn_id"] for h in store.turns.search_text("a", "x", 5)] == ["t1"]  # read whole
    store.turns.upsert([turn("a", "t2", "x y", 0).model_copy(update={"memory": False})])
    assert [h["turn_id"] for h in store.turns.search_text("a", "x", 5)] == ["t1"]
    assert {r["turn_id"]: r["memory"] for r in list_turns(store.db, "a").items} == {
        "t1": True,
        "t2": False,
    }


@pytest.mark.parametrize("migrated_before", [False, True])
def test_a_writer_from_before_the_new_columns_still_appends_to_a_migrated_table(
    tmp_path: pathlib.Path, migrated_before: bool
) -> None:
    """A rolling upgrade: the new writer migrates the table (or finds it migrated by an
    earlier version, which added the column non-null), an old one keeps appending rows
    without the columns it does not know, which are memory and show whole."""
    old = earlier_table(tmp_path, "memory")
    old = pa.schema([f for f in old if f.name != "passages"]).with_metadata(old.metadata)
    if migrated_before:
        lancedb.connect(str(tmp_path / "db")).open_table(TURNS).add_columns({"memory": "true"})
    store = EvidenceStore(str(tmp_path / "db"), "toy", TOY_DIM)
    store.turns.upsert([turn("a", "t1", "the kayak club", 0)])  # migrates
    row = _turn_row(turn_row_id("a", "s1", "t2"), turn("a", "t2", "the kayak pier", 0), None, 400)
    earlier = {k: v for k, v in row.items() if k in old.names}
    store.db.table(TURNS).add(pa.Table.from_pylist([earlier], schema=old))
    assert {h["turn_id"] for h in store.turns.search_text("a", "kayak", 5)} == {"t1", "t2"}
    assert [r["memory"] for r in list_turns(store.db, "a").items] == [True, True]
    shown = {r["turn_id"]: r["passages"] for r in store.turns.near("a", [("s1", 1, 2)])}
    assert shown == {"t1": "", "t2": None}  # none: the turn shows whole


def test_a_turn_row_without_the_flag_is_memory(store: EvidenceStore) -> None:
    """A row written without `memory` (a writer that predates it, the synthetic store) is
    searched, as every turn was before."""
    store.turns.upsert([turn("a", "t1", "x", 0)])
    row = _turn_row(turn_row_id("a", "s1", "t2"), turn("a", "t2", "x z", 0), None, 400)
    tbl = store.db.table(TURNS)
    tbl.add(pa.Table.from_pylist([{**row, "memory": None}], schema=tbl.schema))
    assert {h["turn_id"] for h in store.turns.search_text("a", "x", 5)} == {"t1", "t2"}
