"""Session timelines and row overviews read from a real LanceDB directory."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from schemas import FinalizeReason, RawTurn, Role
from schemas.records import RecordBatch
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from workers.store import EvidenceStore
from workers.store.errors import TurnMissing
from workers.store.timeline import namespace_rows, session_rows, session_timeline

PER_SEGMENT = 6  # turns (one exchange each) per segment


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)


def raw_turns(ns: str, session: str, n: int, emb: HashEmbedder) -> list[RawTurn]:
    vec = emb.embed(["x"])[0].tolist()
    return [
        RawTurn(
            namespace=ns,
            session_id=session,
            turn_id=f"{session}-T{i}",
            exchange_id=f"e{i}",
            seq=i,
            index=0,
            role=Role.user,
            speaker="Ann",
            text=f"turn {i}",
            session_date=datetime(2024, 3, 2 + i // 1000),
            embedding=vec,
            embedding_model=emb.model_name,
        )
        for i in range(n)
    ]


def segments_of(ns: str, session: str, n_turns: int) -> list[RecordBatch]:
    out = []
    for i in range(n_turns // PER_SEGMENT):
        first = i * PER_SEGMENT
        b = batch(ns, i, [f"fact {i}"], session=session)
        rec = b.records[0].model_copy(update={"evidence": [f"{session}-T{first + 1}"]})
        out.append(
            b.model_copy(
                update={
                    "records": [rec],
                    "first_seq": first,
                    "last_seq": first + PER_SEGMENT - 1,
                    "first_turn_id": f"{session}-T{first}",
                    "reason": FinalizeReason.exchange_limit,
                    "exchanges": PER_SEGMENT,
                }
            )
        )
    return out


def fill(store: EvidenceStore, ns: str, session: str, n_turns: int, open_turns: int = 0) -> None:
    emb = HashEmbedder()
    store.turns.upsert(raw_turns(ns, session, n_turns + open_turns, emb))
    index_batches(store, segments_of(ns, session, n_turns), emb)


def test_timeline_of_thousands_of_turns_pages_them_with_the_segments_they_fall_in(
    store: EvidenceStore,
) -> None:
    fill(store, "a", "s1", 3000)
    got = session_timeline(store.db, "a", "s1", page=7, page_size=100)
    assert got.total == 3000 and got.pages == 30 and got.page == 7
    assert [t["seq"] for t in got.turns] == list(range(600, 700))
    # turns 600-699 lie in segments 100 (600-605) to 116 (696-701)
    assert [s["segment_index"] for s in got.segments] == list(range(100, 117))
    first = got.segments[0]
    assert first["reason"] == "exchange_limit" and (first["first_seq"], first["last_seq"]) == (
        600,
        605,
    )
    (record,) = first["records"]
    assert record["semantic_text"] == "fact 100" and record["evidence"] == ["s1-T601"]
    assert "vector" not in record and "vector" not in got.turns[0]


def test_timeline_page_of_a_turn_is_the_page_holding_it(store: EvidenceStore) -> None:
    fill(store, "a", "s1", 300)
    got = session_timeline(store.db, "a", "s1", page_size=50, turn_id="s1-T123")
    assert got.page == 3 and "s1-T123" in [t["turn_id"] for t in got.turns]
    # a turn the session does not hold is said so, not read as the page asked for
    with pytest.raises(TurnMissing, match="no turn nope in session s1 of namespace a"):
        session_timeline(store.db, "a", "s1", page=2, page_size=50, turn_id="nope")
    with pytest.raises(TurnMissing):  # another session's turn
        session_timeline(store.db, "a", "s2", page_size=50, turn_id="s1-T123")


def test_timeline_turns_not_yet_in_a_segment_come_without_one(store: EvidenceStore) -> None:
    fill(store, "a", "s1", 12, open_turns=4)
    got = session_timeline(store.db, "a", "s1", page=2, page_size=8)
    assert [t["seq"] for t in got.turns] == list(range(8, 16))
    assert [(s["first_seq"], s["last_seq"]) for s in got.segments] == [(6, 11)]


def test_timeline_of_another_namespace_is_empty(store: EvidenceStore) -> None:
    fill(store, "a", "s1", 12)
    got = session_timeline(store.db, "b", "s1")
    assert got.turns == [] and got.segments == [] and got.total == 0


def test_rows_per_namespace_and_per_session(store: EvidenceStore) -> None:
    fill(store, "a", "s1", 12)
    fill(store, "a", "s2", 6, open_turns=1)
    fill(store, "b", "s1", 6)
    rows = namespace_rows(store.db)
    assert rows["a"]["turns"] == 19 and rows["a"]["segments"] == 3 and rows["a"]["sessions"] == 2
    assert rows["a"]["records"] == 2  # "fact 0" of s1 and of s2 are one statement
    assert rows["b"]["turns"] == 6 and rows["b"]["nodes"] > 0
    sessions = session_rows(store.db, "a")
    assert sessions["s2"]["turns"] == 7 and sessions["s2"]["last_seq"] == 6
    assert sessions["s2"]["segments"] == 1 and sessions["s1"]["segments"] == 2
    assert sessions["s1"]["records"] == 2 and sessions["s2"]["records"] == 1
    assert sessions["s1"]["first_date"] == datetime(2024, 3, 2)
