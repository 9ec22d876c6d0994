"""The in-process recall harness: where gold turns sit, and what it refuses before ingesting."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evals.recall_probe import categories_of, gold_ranks, run
from tests.streams.bench.files import OVERSIZED, write_locomo
from workers.errors import DatasetError
from workers.evaluation.metrics import QuestionResult, RankedItem
from workers.query.errors import AdapterError


def test_gold_turns_are_counted_at_the_first_item_that_covers_them() -> None:
    items = [RankedItem(f"item {i}", (f"D1:{i}",)) for i in range(40)]
    items[35] = RankedItem("a window", ("D1:2", "D1:35", "D1:36"))  # D1:2 was covered at 2
    results = [
        QuestionResult("multi-hop", frozenset({"D1:2", "D1:20", "D1:35", "D9:9"}), items, 0.0),
        QuestionResult("temporal", frozenset({"D1:0"}), items, 0.0),
    ]
    ranks = gold_ranks(results)
    assert ranks["multi-hop"] == {"<=10": 0.25, "<=30": 0.25, "deeper": 0.25, "none": 0.25}
    assert ranks["temporal"] == {"<=10": 1.0, "<=30": 0.0, "deeper": 0.0, "none": 0.0}


def test_categories_are_read_by_name_and_an_unknown_one_is_named() -> None:
    assert categories_of("") is None
    assert categories_of(" open-domain, multi-hop ,") == frozenset({"open-domain", "multi-hop"})
    with pytest.raises(ValueError, match="unknown categories adversarial, open "):
        categories_of("open,adversarial,temporal")


def test_a_conversation_or_adapter_that_is_not_there_is_named_before_anything_is_ingested(
    tmp_path: Path,
) -> None:
    data = tmp_path / "locomo.json"
    write_locomo(data)
    with pytest.raises(DatasetError, match="no conversation nope, other"):
        run(data, tmp_path / "store", ["tiny", "nope", "other"])
    with pytest.raises(AdapterError, match="no held-back adapter for tiny"):
        run(data, tmp_path / "store", None, held_back=tmp_path)
    assert not (tmp_path / "store").exists()


def test_a_turn_the_contract_refuses_is_named_on_stderr_and_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "locomo.json"
    write_locomo(data, oversized=True)
    with pytest.raises(DatasetError, match="no conversation nope"):  # stops before the ingest
        run(data, tmp_path / "store", ["nope"])
    err = capsys.readouterr().err
    assert f"turn {OVERSIZED}: content: 200,001 characters, at most 200,000" in err
    assert "1 message skipped" in err
