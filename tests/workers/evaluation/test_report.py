"""The report models, the printed table and the plot."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from schemas.errors import ContractError
from workers.evaluation.metrics import CATEGORY_ORDER
from workers.evaluation.plot import plot_recall_vs_budget
from workers.evaluation.report import (
    LocomoReport,
    format_table,
    validate_longmemeval_report,
    validate_report,
)


def _system(base: float, accuracy: bool = False) -> dict[str, Any]:
    return {
        "recall_at_k": {
            c: {"5": base, "10": base + 0.1, "15": base + 0.15} for c in CATEGORY_ORDER
        },
        "recall_at_budget": {
            c: {"500": base, "1000": base + 0.1, "2000": base + 0.2} for c in CATEGORY_ORDER
        },
        "latency_ms": {"p50": 12.5, "p95": 40.0},
        "accuracy": {c: 0.5 for c in CATEGORY_ORDER} if accuracy else None,
    }


def valid_report() -> dict[str, Any]:
    return {
        "schema": "lychee.bench.locomo/1",
        "data": "/data/locomo/some-split.json",
        "variant": "full",
        "llm": None,
        "embedding": "all-MiniLM-L6-v2",
        "conversations": 2,
        "turns": 800,
        "questions": 150,
        "systems": {
            "lychee": _system(0.6),
            "dense": _system(0.4),
            "bm25": _system(0.35),
            "hybrid": _system(0.5),
        },
        "construction": {
            "segments": 90,
            "encoder_calls": 90,
            "turns_per_segment": 8.9,
            "llm_input_tokens": 0,
            "llm_output_tokens": 0,
            "prompt_tokens_estimate": 120000,
            "eager_prompt_tokens_estimate": 400000,
        },
        "query": {"llm_calls_per_question": 0.0, "llm_tokens_per_question": 0.0},
        "ingest": {
            "exchanges": 800,
            "seconds": 20.0,
            "exchanges_per_second": 40.0,
            "searchable_lag_ms": {"p50": 300.0, "p95": 900.0},
        },
        "counts": {
            "all": 150,
            "single-hop": 80,
            "multi-hop": 30,
            "temporal": 30,
            "open-domain": 10,
        },
        "notes": ["construction tokens estimated: no LLM configured"],
        "seconds": 95.0,
        "future_key": {"kept": True},
    }


def test_valid_report_round_trips() -> None:
    report = validate_report(valid_report())
    assert report.schema_ == "lychee.bench.locomo/1"
    dumped = report.to_json_dict()
    assert dumped["schema"] == "lychee.bench.locomo/1" and "schema_" not in dumped
    assert dumped["future_key"] == {"kept": True}  # extra keys survive
    assert validate_report(dumped) == report


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("ingest",), "ingest"),
        (("systems", "dense", "accuracy"), "accuracy"),
        (("construction", "segments"), "segments"),
        (("systems", "bm25", "recall_at_k", "temporal"), "temporal"),
    ],
)
def test_missing_keys_are_rejected(path: tuple[str, ...], expected: str) -> None:
    data = copy.deepcopy(valid_report())
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    with pytest.raises(ContractError, match=expected):
        validate_report(data)


def test_wrong_schema_is_rejected() -> None:
    data = valid_report()
    data["schema"] = "lychee.bench.locomo/2"
    with pytest.raises(ContractError, match="schema"):
        validate_report(data)


def test_table() -> None:
    text = format_table(validate_report(valid_report()))
    assert "accuracy: n/a (no LLM configured)" in text
    for name in ("lychee", "dense", "bm25", "hybrid"):
        assert name in text
    assert "R@5" in text and "R@2000tok" in text
    assert "recall@10 by category" in text and "recall@1000 tokens by category" in text
    assert "multi-hop (n=30)" in text
    assert "construction: 90 segments" in text and "ingest: 800 exchanges" in text

    data = valid_report()
    data["systems"]["lychee"] = _system(0.6, accuracy=True)
    judged = format_table(validate_report(data))
    assert "accuracy lychee: all 0.500" in judged and "n/a" not in judged


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot_recall_vs_budget(LocomoReport.model_validate(valid_report()), tmp_path / "r.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_longmemeval_report_shape() -> None:
    data = {
        "schema": "lychee.bench.longmemeval/1",
        "data": "x.json",
        "granularity": "turn",
        "questions": 2,
        "skipped_abstention": 1,
        "metrics": {"session": {"recall_any@1": 0.5}, "turn": {"recall_any@1": 0.0}},
    }
    assert validate_longmemeval_report(data).questions == 2
    del data["skipped_abstention"]
    with pytest.raises(ContractError, match="skipped_abstention"):
        validate_longmemeval_report(data)
