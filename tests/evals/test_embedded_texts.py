"""`tests.evals.embedded_texts` on a tiny invented conversation, with the real model."""

from __future__ import annotations

from pathlib import Path

from tests.evals.embedded_texts import count, lines, node_kind
from tests.streams.bench.files import write_locomo


def test_node_kind_tells_frames_pairs_and_labels_apart() -> None:
    assert node_kind("session s1, turns t1–t4\nAnn booked a train") == "nodes: event frames"
    assert node_kind("Ann / travel") == "nodes: pairs"
    assert node_kind("travel") == "nodes: labels"


def test_embedded_texts_counts_each_stage_per_exchange(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    exchanges, tally = count(data, None)
    assert exchanges == 16
    assert tally.asked["segmenter"] == tally.computed["segmenter"] == 16  # one per exchange
    assert tally.asked["indexer: records"] > 0 and tally.asked["indexer: nodes"] > 0
    kinds = ("nodes: event frames", "nodes: pairs", "nodes: labels")
    assert sum(tally.asked[k] for k in kinds) == tally.asked["indexer: nodes"]
    assert tally.computed["indexer: nodes"] <= tally.asked["indexer: nodes"]
    printed = lines(exchanges, tally)
    assert printed[0].startswith("16 exchanges")
    assert printed[-1].startswith("indexer texts equal to a segmenter text: 0 of ")
