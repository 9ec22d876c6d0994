"""What a request's budget keeps, over a dump: the leading items against passing over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas import EvidenceItem
from tests.evals import budget_probe
from tests.evals.budget_probe import RULES, figures

LONG = "the trail, the weather, the crowded ferry and the small bakery near the harbour " * 12


def _item(turn: str, text: str) -> dict[str, Any]:
    item = EvidenceItem(kind="record", item_id=turn, text=text, turn_ids=[turn], session_id="s")
    return item.model_dump(mode="json")


# a long item first, then the two gold turns in short ones
ROWS = [
    {
        "namespace": "conv-a",
        "question": "q1",
        "category": "single-hop",
        "gold": ["D1:2", "D1:3"],
        "plan": {},
        "items": [_item("D1:1", LONG), _item("D1:2", "Ann hiked."), _item("D1:3", "Ann swam.")],
    },
    {
        "namespace": "conv-a",
        "question": "q2",
        "category": "single-hop",
        "gold": [],  # no gold: left out
        "plan": {},
        "items": [_item("D1:4", "Ann slept.")],
    },
]


def test_passing_over_the_long_item_keeps_the_short_ones_the_leading_rule_loses() -> None:
    leading = figures(ROWS, 100, RULES["leading"])
    passing = figures(ROWS, 100, RULES["passing over"])
    assert (leading["items"], leading["recall"], leading["hit"]) == (0, 0.0, 0.0)
    assert (passing["items"], passing["recall"], passing["hit"]) == (2, 1.0, 1.0)
    roomy = figures(ROWS, 10_000, RULES["leading"])
    assert (roomy["items"], roomy["recall"]) == (3, 1.0)


def test_the_command_prints_each_rule_and_refuses_a_file_that_is_no_dump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(ROWS))
    monkeypatch.setattr("sys.argv", ["budget_probe", str(dump), "--budgets", "100"])
    budget_probe.main()
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [
        "dump.json at 100 tokens, leading",
        "dump.json at 100 tokens, passing over",
    ]
    assert "median 2 items, recall 1.000, hit 1.000" in out[1]
    dump.write_text("{}")
    with pytest.raises(SystemExit) as stop:
        budget_probe.main()
    assert stop.value.code == 2 and "not a dump of replies" in capsys.readouterr().err
