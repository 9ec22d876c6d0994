"""How a node update folds into the stored node: links, bounds, idempotence (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.records import NodeType
from workers.store.nodes import NodeUpdate, combine_updates, merge_node, node_id, node_text


def test_node_id_is_namespace_type_key() -> None:
    assert node_id("a", NodeType.entity, "ann") == "a/entity/ann"
    assert node_id("a", "temporal", "day:2024-03-02") == "a/temporal/day:2024-03-02"


def update(ids: Sequence[str], label: str = "Ann") -> NodeUpdate:
    return NodeUpdate(
        namespace="a",
        node_type=NodeType.entity,
        key="ann",
        label=label,
        record_ids=tuple(ids),
        texts=tuple(f"text of {i}" for i in ids),
    )


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
        namespace="a",
        node_type=NodeType.topic,
        key="music",
        label="music",
        record_ids=tuple(ids),
        texts=tuple(f"{i}" * 30 for i in range(10)),
    )
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
