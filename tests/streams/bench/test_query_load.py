"""`lychee bench query-load`: questions/s and round-trip percentiles per concurrency."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.streams.bench.files import write_locomo

pytestmark = pytest.mark.integration


def test_bench_query_load_each_level_answers_its_own_questions(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from streams.bench.query_load import run_query_load

    data = tmp_path / "tiny.json"
    write_locomo(data)
    result = run_query_load(settings, data, "tiny", (1, 2), k=5, per_level=2)
    assert result["questions_per_level"] == 2 and result["turns"] == 16
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2]
    for lv in result["levels"]:
        assert lv["failed"] == 0 and lv["questions"] == 2
        assert lv["questions_per_second"] > 0
        assert 0 < lv["round_trip_ms"]["p50"] <= lv["round_trip_ms"]["p95"]


def test_bench_query_load_too_few_questions_is_a_clear_error(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from streams.bench.errors import BenchError
    from streams.bench.query_load import run_query_load

    data = tmp_path / "tiny.json"
    write_locomo(data)
    with pytest.raises(BenchError, match="too few"):
        run_query_load(settings, data, "tiny", (1, 2, 4, 8, 16), k=5, per_level=2)
