"""Paired comparison of two recall dumps: differences, their interval, and refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schemas import EvidenceItem
from tests.evals import compare
from tests.evals.compare import DumpMismatch, interval, load, paired, report


def _item(turns: list[str]) -> dict[str, Any]:
    return EvidenceItem(
        kind="record",
        item_id="/".join(turns),
        text=f"about {' '.join(turns)}",
        turn_ids=turns,
        session_id="s1",
    ).model_dump(mode="json")


def _reply(question: str, category: str, gold: list[str], items: list[list[str]]) -> dict[str, Any]:
    return {
        "namespace": "conv-a",
        "question": question,
        "category": category,
        "gold": gold,
        "plan": {},
        "items": [_item(t) for t in items],
    }


BEFORE = [
    _reply("q1", "single-hop", ["D1:1"], [["D1:1"], ["D1:2"]]),
    _reply("q2", "multi-hop", ["D1:3", "D1:4"], [["D1:3"], ["D1:9"]]),
    _reply("q3", "multi-hop", [], [["D1:5"]]),  # no gold: left out of recall
]
AFTER = [
    BEFORE[0],
    _reply("q2", "multi-hop", ["D1:3", "D1:4"], [["D1:3"], ["D1:4"]]),
    BEFORE[2],
]


def test_a_question_that_gains_a_gold_turn_moves_its_category_and_the_total() -> None:
    pairs = paired(BEFORE, AFTER)
    assert [p.category for p in pairs] == ["single-hop", "multi-hop"]
    lines = report(pairs, ks=(1, 2), budgets=(), resamples=500)
    by = {tuple(line.split()[:2]): line for line in lines}
    assert "0.500 -> 1.000  diff +0.5000" in by["R@2", "multi-hop"]
    assert "gained 1, lost 0" in by["R@2", "multi-hop"]
    assert "0.750 -> 1.000  diff +0.2500" in by["R@2", "all"]
    assert "diff +0.0000 [+0.0000, +0.0000]  gained 0, lost 0" in by["R@1", "all"]
    assert "conv-a +0.2500" in by["R@2", "by"]


def test_the_interval_holds_the_mean_difference_and_is_the_same_for_the_same_seed() -> None:
    diffs = np.array([0.0] * 90 + [1.0] * 10)
    lo, hi = interval(diffs, np.random.default_rng(0))
    assert lo < 0.1 < hi
    assert lo > 0.0 and hi < 0.2
    assert (lo, hi) == interval(diffs, np.random.default_rng(0))
    assert interval(np.zeros(5), np.random.default_rng(1)) == (0.0, 0.0)


def test_dumps_of_other_questions_or_orders_are_refused_naming_the_first_difference() -> None:
    with pytest.raises(DumpMismatch, match="3 questions against 2"):
        paired(BEFORE, AFTER[:2])
    with pytest.raises(DumpMismatch, match="question 1: conv-a 'q2' against conv-a 'q3'"):
        paired(BEFORE, [AFTER[0], AFTER[2], AFTER[1]])


def test_a_file_that_is_not_a_dump_is_refused_naming_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"recall_at_k": {}}))
    with pytest.raises(DumpMismatch, match="not a dump of replies"):
        load(path)
    path.write_text(json.dumps([{"namespace": "conv-a", "question": "q1"}]))
    with pytest.raises(DumpMismatch, match="reply 0 has no category, gold, items"):
        load(path)
    path.write_text(json.dumps([{**BEFORE[0], "gold": "D1:1"}]))
    with pytest.raises(DumpMismatch, match="reply 0: gold and items must be lists"):
        load(path)
    for garbage in (b'[{"namespace": ', b"\x89PNG\r\n\x1a\n\xff"):
        path.write_bytes(garbage)
        with pytest.raises(DumpMismatch, match="report.json: not JSON"):
            load(path)


def test_the_command_prints_the_comparison_and_exits_2_on_a_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(BEFORE))
    after.write_text(json.dumps(AFTER))
    monkeypatch.setattr("sys.argv", ["compare", str(before), str(after), "--k", "2"])
    compare.main()
    out = capsys.readouterr().out
    assert "R@2         multi-hop    n=1    0.500 -> 1.000" in out
    assert "R@1000 tok  all" in out
    after.write_text(json.dumps(AFTER[:1]))
    with pytest.raises(SystemExit) as stop:
        compare.main()
    assert stop.value.code == 2
    assert "3 questions against 1" in capsys.readouterr().err
