"""Evidence nodes derived from records: keys, types, merging and bounds (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest

from schemas import Role, Segment, SegmentExchange, Turn
from schemas.records import MemoryRecord, MemoryType, NodeType, RecordBatch, Temporal
from tests.workers.segments import segment_of
from workers.encoder.records import build_record
from workers.indexer.nodes import (
    NodeUpdate,
    combine_updates,
    derive_nodes,
    merge_node,
    node_id,
    node_text,
    normalize_key,
)


def make_segment(
    ns: str = "a", session: str = "s1", index: int = 0, turn_ids: Sequence[str] = ("t1", "t2")
) -> Segment:
    ex = SegmentExchange(
        exchange_id=f"{session}:e{index}", seq=index, turn_ids=list(turn_ids),
        turns=[Turn(role=Role.user, content="hello", speaker="Ann") for _ in turn_ids], tokens=4,
    )  # fmt: skip
    return segment_of([ex], date=datetime(2024, 3, 2, 10, 0), ns=ns, session=session, index=index)


def make_batch(seg: Segment, records: list[MemoryRecord]) -> RecordBatch:
    return RecordBatch(
        namespace=seg.namespace, session_id=seg.session_id, segment_id=seg.segment_id,
        segment_index=seg.index, first_turn_id=seg.first_turn_id, last_turn_id=seg.last_turn_id,
        session_date=seg.session_date, encoder="extractive", records=records,
    )  # fmt: skip


def rec(
    seg: Segment,
    text: str,
    entities: Sequence[str] = (),
    tags: Sequence[str] = (),
    temporal: Temporal | None = None,
) -> MemoryRecord:
    return build_record(
        seg, MemoryType.fact, text, ["t1"], entities=entities, tags=tags, temporal=temporal
    )


def by_id(updates: list[NodeUpdate]) -> dict[str, NodeUpdate]:
    return {u.id: u for u in updates}


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("  Lisbon-Trip!! ", "lisbon trip"),
        ("lisbon_trip", "lisbon trip"),
        ("LISBON/trip", "lisbon trip"),
        ("Dr. Smith", "dr smith"),
        ("Ann's    new\tcafé", "anns new café"),
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),  # case folding, not just lowercasing
        ("!!!", ""),
    ],
)
def test_normalize_key_folds_case_separators_punctuation_whitespace(raw: str, key: str) -> None:
    assert normalize_key(raw) == key


def test_node_id_is_namespace_type_key() -> None:
    assert node_id("a", NodeType.entity, "ann") == "a/entity/ann"
    assert node_id("a", "temporal", "day:2024-03-02") == "a/temporal/day:2024-03-02"


def test_derive_nodes_entity_topic_and_pairs() -> None:
    seg = make_segment()
    r = rec(seg, "Ann is planning a trip to Lisbon", ["Ann", "Lisbon-Trip"], ["Travel", "plans"])
    nodes = by_id(derive_nodes(make_batch(seg, [r])))
    assert {u.id for u in nodes.values() if u.node_type is NodeType.entity} == {
        "a/entity/ann",
        "a/entity/lisbon trip",
    }
    assert nodes["a/entity/lisbon trip"].label == "Lisbon-Trip"
    assert {u.key for u in nodes.values() if u.node_type is NodeType.topic} == {"travel", "plans"}
    pairs = {u.key for u in nodes.values() if u.node_type is NodeType.entity_topic}
    assert pairs == {"ann|travel", "ann|plans", "lisbon trip|travel", "lisbon trip|plans"}
    for u in nodes.values():
        assert u.record_ids == (r.record_id,)
        assert u.texts == (r.semantic_text,)
        assert u.namespace == "a"


def test_derive_nodes_first_written_label_and_merged_links() -> None:
    seg = make_segment()
    r1 = rec(seg, "Lisbon trip booked", ["Lisbon-Trip"])
    r2 = rec(seg, "Lisbon trip moved to May", ["lisbon trip"])
    dup = rec(seg, "Lisbon trip booked", ["LISBON TRIP"])  # the same statement again
    node = by_id(derive_nodes(make_batch(seg, [r1, r2, dup])))["a/entity/lisbon trip"]
    assert node.label == "Lisbon-Trip"
    assert node.record_ids == (r1.record_id, r2.record_id)
    assert node.texts == (r1.semantic_text, r2.semantic_text)


def test_derive_nodes_temporal_day_month_year_keys() -> None:
    seg = make_segment()
    t = Temporal(t_ref="2024-03-02", t_valid_from="2024-03", t_valid_to="2025")
    r = rec(seg, "Ann starts the course", temporal=t)
    temporal = [u for u in derive_nodes(make_batch(seg, [r])) if u.node_type is NodeType.temporal]
    assert [u.key for u in temporal] == ["day:2024-03-02", "month:2024-03", "year:2025"]
    labels = {u.key: u.label for u in temporal}
    assert "March 2024" in labels["day:2024-03-02"]
    assert labels["month:2024-03"] == "2024-03 (March 2024)"


def test_derive_nodes_month_only_gives_no_day() -> None:
    seg = make_segment()
    r = rec(seg, "Ann moved", temporal=Temporal(t_ref="2023-11"))
    keys = [u.key for u in derive_nodes(make_batch(seg, [r])) if u.node_type is NodeType.temporal]
    assert keys == ["month:2023-11"]


def test_derive_nodes_event_frame_has_session_and_turn_range() -> None:
    seg = make_segment(session="s7", index=3, turn_ids=("t10", "t11", "t12"))
    r1, r2 = rec(seg, "first statement"), rec(seg, "second statement")
    frame = derive_nodes(make_batch(seg, [r1, r2]))[-1]
    assert frame.node_type is NodeType.event_frame
    assert frame.key == "a/s7/3"
    assert frame.id == "a/event_frame/a/s7/3"
    assert frame.label == "session s7, turns t10–t12"
    assert (frame.session_id, frame.first_turn_id, frame.last_turn_id) == ("s7", "t10", "t12")
    assert frame.record_ids == (r1.record_id, r2.record_id)
    assert frame.updated_at == datetime(2024, 3, 2, 10, 0)


def test_derive_nodes_empty_batch_has_no_nodes() -> None:
    assert derive_nodes(make_batch(make_segment(), [])) == []


def test_derive_nodes_is_deterministic_and_grouped_by_type() -> None:
    seg = make_segment()
    records = [
        rec(seg, "Ann likes jazz", ["Ann"], ["music"], Temporal(t_ref="2024-03-01")),
        rec(seg, "Bob plays bass", ["Bob", "Ann"], ["music", "bands"]),
    ]
    first = derive_nodes(make_batch(seg, records))
    assert first == derive_nodes(make_batch(seg, records))
    types = [u.node_type for u in first]
    assert types[:4] == [NodeType.entity, NodeType.topic, NodeType.entity_topic, NodeType.temporal]
    assert types[-1] is NodeType.event_frame


def test_derive_nodes_refuses_a_record_of_another_namespace() -> None:
    seg, other = make_segment("a"), make_segment("b")
    with pytest.raises(ValueError, match="namespace"):
        derive_nodes(make_batch(seg, [rec(other, "foreign statement", ["Ann"])]))


def update(ids: Sequence[str], label: str = "Ann") -> NodeUpdate:
    return NodeUpdate(
        namespace="a", node_type=NodeType.entity, key="ann", label=label,
        record_ids=tuple(ids), texts=tuple(f"text of {i}" for i in ids),
    )  # fmt: skip


def test_merge_node_keeps_newest_records_when_bounded() -> None:
    row = merge_node(None, update(["r1", "r2"]), max_records=3)
    row = merge_node(row, update(["r3", "r4"], label="ANN"), max_records=3)
    assert row["record_ids"] == ["r2", "r3", "r4"]
    assert row["record_texts"] == ["text of r2", "text of r3", "text of r4"]
    assert row["label"] == "Ann"  # the first label stays
    assert row["id"] == "a/entity/ann"
    assert row["text"].startswith("Ann\ntext of r4\ntext of r3")
    assert "text of r1" not in row["text"]


def test_merge_node_record_seen_again_becomes_newest() -> None:
    row = merge_node(None, update(["r1", "r2", "r3"]), max_records=3)
    row = merge_node(row, update(["r1", "r4"]), max_records=3)
    assert row["record_ids"] == ["r3", "r1", "r4"]


def test_merge_node_bounds_the_search_text_keeping_newest() -> None:
    ids = [f"r{i}" for i in range(10)]
    up = NodeUpdate(
        namespace="a", node_type=NodeType.topic, key="music", label="music",
        record_ids=tuple(ids), texts=tuple(f"{i}" * 30 for i in range(10)),
    )  # fmt: skip
    row = merge_node(None, up, max_text_chars=100)
    assert len(row["text"]) <= 100
    assert row["text"].startswith("music\n" + "9" * 30 + "\n" + "8" * 30)
    assert "0" * 30 not in row["text"]
    assert row["record_ids"] == ids  # the links are bounded by count, not by text


def test_merge_node_is_idempotent() -> None:
    up = update(["r1", "r2", "r3", "r4"])
    once = merge_node(None, up, max_records=3)
    assert merge_node(once, up, max_records=3) == once


def test_combine_updates_equals_merging_one_by_one() -> None:
    ups = [update(["r1", "r2"]), update(["r3", "r1"], label="x"), update(["r4"])]
    sequential: dict[str, object] | None = None
    for u in ups:
        sequential = merge_node(sequential, u, max_records=3)
    (combined,) = combine_updates(ups)
    assert merge_node(None, combined, max_records=3) == sequential
    assert combined.record_ids == ("r2", "r3", "r1", "r4")


def test_node_text_label_then_newest_first() -> None:
    assert node_text("Ann", ["old", "new"]) == "Ann\nnew\nold"
    assert node_text("Ann", ["x" * 50], max_chars=10) == "Ann\nxxxxxx"


def test_merge_node_in_order_redelivery_after_eviction_changes_nothing() -> None:
    a, b = update(["r1", "r2", "r3"]), update(["r4", "r5"])
    row = merge_node(merge_node(None, a, max_records=3), b, max_records=3)
    assert row["record_ids"] == ["r3", "r4", "r5"]
    replayed = merge_node(merge_node(row, a, max_records=3), b, max_records=3)
    assert replayed == row
    assert merge_node(row, b, max_records=3) == row  # only the tail replayed
