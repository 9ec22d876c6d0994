"""`lychee bench latency` at LoCoMo scale and on a synthetic store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.streams.bench.files import write_locomo

pytestmark = pytest.mark.integration


def test_bench_latency_reports_percentiles_for_every_question(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from streams.bench.errors import BenchError
    from streams.bench.latency import run_latency

    data = tmp_path / "tiny.json"
    write_locomo(data)
    (sample,) = json.loads(data.read_text())
    data.write_text(json.dumps([sample, {**sample, "sample_id": "tiny-2"}]))
    with pytest.raises(BenchError, match="another conversation"):
        run_latency(settings, data, "tiny", k=5, beside="tiny")
    result = run_latency(settings, data, "tiny", k=5, beside="tiny-2")
    assert result["questions"] == 5 and result["turns"] == 16
    beside = result["beside"]  # asked again while the second sample was ingested
    assert beside["turns"] == 16 and beside["questions"] >= 1
    assert 0 < beside["round_trip_ms"]["p50"] <= beside["round_trip_ms"]["p95"]
    for key in ("retrieval_ms", "round_trip_ms"):
        assert 0 < result[key]["p50"] <= result[key]["p95"]
    stages = result["stages_ms"]
    assert {"plan", "recall"} <= set(stages) and "total" not in stages
    assert any(name.startswith("recall.") for name in stages)  # the channels, each timed
    assert stages["recall"]["p50"] <= result["retrieval_ms"]["p95"]


def test_bench_latency_on_a_synthetic_store_builds_ann_and_reports(
    embedder, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from streams.bench.errors import BenchError
    from streams.bench.latency import run_synthetic
    from streams.settings import Settings
    from workers.evaluation import synthetic
    from workers.store import EvidenceStore

    path = tmp_path / "syn"
    store = EvidenceStore(str(path), embedder.model_name, embedder.dim)
    synthetic.build(store, embedder, 1200, 4, pool=32, chunk=500)
    # the fixture's torch vectors are the fp32 ONNX path's
    settings = Settings.load(None, store={"ann_min_rows": 256}, embedding={"backend": "onnx"})
    result = run_synthetic(settings, 1200, 4, 5, path, questions=6)
    assert result["build_s"] == 0.0  # the store held this shape: reused, not rebuilt
    assert result["ann_indexed"] == ["records", "turns", "nodes"] and result["ann_index_s"] > 0
    assert result["namespace"] == synthetic.namespace(2) and result["questions"] == 6
    for key in ("retrieval_ms", "retrieval_ann_ms"):
        assert 0 < result[key]["p50"] <= result[key]["p95"]
    assert 0.0 < result["ann_vs_exact"]["recall"] <= 1.0
    with pytest.raises(BenchError, match="another store"):
        run_synthetic(settings, 2400, 4, 5, path, questions=6)
