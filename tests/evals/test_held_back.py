"""A constant chosen with each conversation held back: the choice per fold and its figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.evals import held_back
from tests.evals.held_back import Scored, choose, figures
from tests.evals.test_compare import _item


def rows(per: dict[str, float], category: str = "single-hop") -> list[Scored]:
    return [Scored(ns, category, r, r) for ns, r in per.items()]


def test_each_conversation_is_scored_with_the_setting_chosen_on_the_others() -> None:
    settings = {
        "x": rows({"a": 0.5, "b": 0.5, "c": 0.5}),
        "y": rows({"a": 1.0, "b": 1.0, "c": 0.0}),
    }
    choice = choose(settings, no_category_lower=False)
    assert choice == {"a": "x", "b": "x", "c": "y"}  # a tie goes to the earlier dump
    held = [r for ns, n in choice.items() for r in settings[n] if r.namespace == ns]
    assert figures(held)["R@10"] == pytest.approx(1 / 3)  # below either setting's own figure


def test_a_setting_that_lowers_a_category_on_the_others_is_not_chosen_when_asked() -> None:
    x = rows({"a": 0.5, "b": 0.5}) + rows({"a": 1.0, "b": 1.0}, "multi-hop")
    y = rows({"a": 1.0, "b": 1.0}) + rows({"a": 0.75, "b": 0.75}, "multi-hop")
    assert choose({"x": x, "y": y}, no_category_lower=False) == {"a": "y", "b": "y"}
    assert choose({"x": x, "y": y}, no_category_lower=True) == {"a": "x", "b": "x"}


def _dump(recall: dict[str, bool]) -> list[dict[str, Any]]:
    return [
        {
            "namespace": ns,
            "question": "q",
            "category": "single-hop",
            "gold": ["D1:1"],
            "plan": {},
            "items": [_item(["D1:1" if hit else "D1:2"])],
        }
        for ns, hit in recall.items()
    ]


def test_the_command_prints_each_fold_and_refuses_dumps_of_other_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    x, y = tmp_path / "x.json", tmp_path / "y.json"
    x.write_text(json.dumps(_dump({"a": True, "b": False, "c": True})))
    y.write_text(json.dumps(_dump({"a": True, "b": True, "c": False})))
    monkeypatch.setattr("sys.argv", ["held_back", str(x), str(y)])
    held_back.main()
    out = capsys.readouterr().out
    assert f"c held back: chosen on the others {y}" in out
    assert "held back                                R@10 0.333" in out
    y.write_text(json.dumps(_dump({"a": True, "b": True})))
    with pytest.raises(SystemExit) as stop:
        held_back.main()
    assert stop.value.code == 2
    assert "3 questions against 2" in capsys.readouterr().err
    x.write_text(json.dumps(_dump({"a": True})))
    y.write_text(json.dumps(_dump({"a": False})))
    with pytest.raises(SystemExit):
        held_back.main()
    assert "one conversation (a): nothing to hold it back from" in capsys.readouterr().err
