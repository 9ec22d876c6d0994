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


def _typed(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with per-type figures and pair counts for lychee and the dense baseline."""
    for name, base in (("lychee", 0.5), ("dense", 0.25)):
        kinds = {"update": 20, "order": 19}
        data["systems"][name]["hit_at_k"] = {
            c: {"5": base, "10": base + 0.2} for c in CATEGORY_ORDER
        }
        data["systems"][name]["by_kind"] = {
            "recall_at_k": {t: {"5": base, "10": base + 0.1} for t in kinds},
            "hit_at_k": {t: {"5": base, "10": base + 0.3} for t in kinds},
            "recall_at_budget": {t: {"500": base, "1000": base + 0.05} for t in kinds},
            "counts": kinds,
        }
        data["systems"][name]["pairs"] = {
            "newer_first": {"n": int(base * 16), "of": 20, "k": 10},
            "both_covered": {"n": int(base * 8), "of": 20, "k": 10},
        }
    return data


def test_per_type_figures_and_pair_counts_are_printed_per_system() -> None:
    report = validate_report(_typed(valid_report()))
    assert report.systems["lychee"].pairs is not None
    assert report.systems["lychee"].pairs["newer_first"].n == 8
    assert report.systems["bm25"].by_kind is None and report.systems["bm25"].pairs is None
    lines = format_table(report).splitlines()
    for title in ("recall@10", "hit@10", "recall@1000 tokens"):
        block = lines[lines.index(f"{title} by question type") :]
        assert block[1].split() == ["type", "n", "lychee", "dense"], title
    at = lines.index("hit@10 by question type")
    assert lines[at + 2].split() == ["update", "20", "0.800", "0.550"]
    assert lines[at + 3].split() == ["order", "19", "0.800", "0.550"]
    assert "hit@10 by category" in lines
    assert (
        "knowledge updates, the newer value in the top 10 above the older: lychee 8 of 20; "
        "dense 4 of 20" in lines
    )
    assert "contradictions, both statements in the top 10: lychee 4 of 20; dense 2 of 20" in lines
    untyped = format_table(validate_report(valid_report()))
    assert "question type" not in untyped and "of 20" not in untyped


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["by_kind"]["hit_at_k"].pop("order"), "types differ"),
        (lambda s: s["by_kind"]["recall_at_k"]["update"].update({"10": 1.5}), "outside"),
        (lambda s: s["pairs"]["newer_first"].update({"n": 21}), "exceeds"),
        (lambda s: s["pairs"]["both_covered"].pop("of"), "of"),
    ],
)
def test_bad_per_type_figures_or_pair_counts_are_rejected(change: Any, expected: str) -> None:
    data = _typed(valid_report())
    change(data["systems"]["dense"])
    with pytest.raises(ContractError, match=expected):
        validate_report(data)


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
