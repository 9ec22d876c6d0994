"""Evidence nodes derived from records: keys, types and links (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import pytest

from schemas import Segment
from schemas.records import MAX_LABELS, PAIRED, MemoryRecord, MemoryType, NodeType, Temporal
from tests.workers.builders import make_batch, make_segment
from workers.encoder.encoded import build_record
from workers.indexer.nodes import derive_nodes, normalize_key
from workers.store.nodes import NodeUpdate


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


def test_a_record_of_many_labels_pairs_only_its_first_ones() -> None:
    """Every label is a node, but pairs of 32 entities and 32 tags would be 1,024 rows a
    record: the first `PAIRED` of each are paired."""
    seg = make_segment()
    many = [f"label {i}" for i in range(MAX_LABELS)]
    nodes = derive_nodes(make_batch(seg, [rec(seg, "Ann lists her labels", many, many)]))
    counts = Counter(u.node_type for u in nodes)
    assert counts[NodeType.entity] == counts[NodeType.topic] == MAX_LABELS
    assert counts[NodeType.entity_topic] == PAIRED * PAIRED
    assert {u.key for u in nodes if u.node_type is NodeType.entity_topic} == {
        f"label {e}|label {t}" for e in range(PAIRED) for t in range(PAIRED)
    }


@pytest.mark.parametrize("left_out", list(NodeType))
def test_derive_nodes_builds_only_the_types_asked_for(left_out: NodeType) -> None:
    seg = make_segment()
    r = rec(seg, "Ann flew to Lisbon", ["Ann"], ["travel"], Temporal(t_ref="2024-03-02"))
    every = {u.node_type for u in derive_nodes(make_batch(seg, [r]))}
    assert every == set(NodeType)
    some = derive_nodes(make_batch(seg, [r]), frozenset(NodeType) - {left_out})
    assert {u.node_type for u in some} == every - {left_out}


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
