"""`lychee bench locomo` and `lychee bench longmemeval` end to end on files written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streams.bench_locomo import BenchError, run_locomo
from streams.bench_longmemeval import run_longmemeval
from tests.streams.test_bench_segmentation import SESSION_1, SESSION_2
from tests.workers.evaluation.test_longmemeval import INSTANCES
from workers.evaluation.plot import plot_recall_vs_budget
from workers.evaluation.report import format_table, validate_report

pytestmark = pytest.mark.integration


def write_locomo(path: Path) -> None:
    def turns(session: int, rows: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [
            {"speaker": s, "dia_id": f"D{session}:{i}", "text": t}
            for i, (s, t) in enumerate(rows, 1)
        ]

    conversation = {
        "speaker_a": "Mara", "speaker_b": "Jonas",
        "session_1_date_time": "6:10 pm on 2 June, 2024", "session_1": turns(1, SESSION_1),
        "session_2_date_time": "11:45 am on 14 July, 2024", "session_2": turns(2, SESSION_2),
    }  # fmt: skip
    qa = [
        {"question": "Which tomato varieties did Mara plant?", "answer": "San Marzano and cherry",
         "evidence": ["D1:3"], "category": 4},
        {"question": "Which train does Mara take to the jazz festival and when?", "answer": "8:12, July 6",
         "evidence": ["D1:7"], "category": 2},
        {"question": "What happened to the tomatoes after the festival?", "answer": "one wilted",
         "evidence": ["D2:3", "D2:4"], "category": 1},
        {"question": "What would Mara cook with basil?", "answer": "caprese", "evidence": ["D2:7", "D2:8"],
         "category": 3},
        {"question": "Is this adversarial?", "answer": "n/a", "evidence": ["D1:1"], "category": 5},
        {"question": "A question without evidence", "answer": "n/a", "evidence": [], "category": 4},
    ]  # fmt: skip
    path.write_text(json.dumps([{"sample_id": "tiny", "conversation": conversation, "qa": qa}]))


def test_bench_locomo_end_to_end_report_matches_the_schema(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "tiny.json"
    write_locomo(data)
    report = run_locomo(settings, data, progress=False)
    assert validate_report(report.to_json_dict()) == report
    assert report.conversations == 1 and report.turns == 16
    assert report.questions == 5  # category 5 dropped; the empty-evidence one is asked...
    assert report.counts is not None and report.counts["all"] == 4  # ...and left out of recall
    assert set(report.systems) == {"lychee", "dense", "bm25", "hybrid"}
    for system in report.systems.values():
        for cat, row in system.recall_at_k.items():
            assert set(row) == {"5", "10", "15"} and all(0.0 <= v <= 1.0 for v in row.values()), cat
    # 16 short turns fit into 2000 tokens: every system finds all the evidence there
    for name in ("lychee", "dense", "hybrid"):  # BM25 ranks only turns that share a word
        assert report.systems[name].recall_at_budget["all"]["2000"] == 1.0, name
    assert report.construction.segments >= 2 and report.construction.turns_per_segment > 1
    assert report.ingest.exchanges == 16
    assert "accuracy: n/a" in format_table(report)
    png = plot_recall_vs_budget(report, tmp_path / "recall.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_locomo_worker_variant_on_a_configured_stack_is_refused(
    settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "tiny.json"
    write_locomo(data)
    with pytest.raises(BenchError, match="LYCHEE_SEGMENTER__MODE=eager"):
        run_locomo(settings, data, variant="eager", progress=False)
    with pytest.raises(BenchError, match="no conversation"):
        run_locomo(settings, data, conversation_ids=["nope"], progress=False)


def test_bench_longmemeval_end_to_end(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(INSTANCES))
    report = run_longmemeval(settings, data, "turn", progress=False)
    assert report.questions == 1 and report.skipped_abstention == 1
    session = report.metrics["session"]
    # one answer session among two: it is within the first 3 sessions whatever the order
    assert session["recall_any@3"] == 1.0 and session["recall_all@3"] == 1.0
    # one gold session: nDCG@1 is 1 exactly when it ranks first, as recall_any@1 is
    assert session["ndcg_any@1"] == session["recall_any@1"]
    assert report.metrics["turn"]["recall_any@50"] == 1.0


def test_bench_latency_reports_percentiles_for_every_question(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from streams.bench_latency import run_latency

    data = tmp_path / "tiny.json"
    write_locomo(data)
    result = run_latency(settings, data, "tiny", k=5)
    assert result["questions"] == 5 and result["turns"] == 16
    for key in ("retrieval_ms", "round_trip_ms"):
        assert 0 < result[key]["p50"] <= result[key]["p95"]


def test_synthetic_store_spreads_rows_evenly_and_links_within_namespaces(
    embedder, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from workers.evaluation import synthetic
    from workers.indexer.records_store import RecordsStore
    from workers.indexer.store import EvidenceStore

    store = EvidenceStore(str(tmp_path / "db"), embedder.model_name, embedder.dim)
    info = synthetic.build(store, embedder, 1200, 4, pool=32, chunk=500)
    assert info.rows == {"records": 1200, "turns": 1200, "nodes": 600}
    rs = RecordsStore(store)
    assert [rs.count("records", ns) for ns in info.namespaces] == [300] * 4
    assert [rs.count("turns", ns) for ns in info.namespaces] == [300] * 4
    rows = rs.table("records").search().limit(None).to_arrow()  # type: ignore[union-attr]
    norms = np.linalg.norm(np.stack(rows.column("vector").to_numpy(zero_copy_only=False)), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    owner = dict(
        zip(rows.column("id").to_pylist(), rows.column("namespace").to_pylist(), strict=True)
    )
    for node in rs.table("nodes").search().limit(None).to_list():  # type: ignore[union-attr]
        assert node["record_ids"] and all(owner[r] == node["namespace"] for r in node["record_ids"])
    with pytest.raises(ValueError, match="at least one record per namespace"):
        synthetic.build(store, embedder, 3, 4)


def test_bench_latency_on_a_synthetic_store_builds_ann_and_reports(
    embedder, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from streams.bench_latency import BenchError, run_synthetic
    from streams.settings import Settings
    from workers.evaluation import synthetic
    from workers.indexer.store import EvidenceStore

    path = tmp_path / "syn"
    store = EvidenceStore(str(path), embedder.model_name, embedder.dim)
    synthetic.build(store, embedder, 1200, 4, pool=32, chunk=500)
    settings = Settings(ann_min_rows=256)
    result = run_synthetic(settings, 1200, 4, 5, path, questions=6)
    assert result["build_s"] == 0.0  # the store held this shape: reused, not rebuilt
    assert result["ann_indexed"] == ["records", "turns", "nodes"] and result["ann_index_s"] > 0
    assert result["namespace"] == synthetic.namespace(2) and result["questions"] == 6
    for key in ("retrieval_ms", "retrieval_ann_ms"):
        assert 0 < result[key]["p50"] <= result[key]["p95"]
    assert 0.0 < result["ann_vs_exact"]["recall"] <= 1.0
    with pytest.raises(BenchError, match="another store"):
        run_synthetic(settings, 2400, 4, 5, path, questions=6)
