"""`lychee bench longmemeval` end to end on a file written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.bench.longmemeval import run_longmemeval
from tests.workers.evaluation.test_longmemeval import INSTANCES

pytestmark = pytest.mark.integration


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
