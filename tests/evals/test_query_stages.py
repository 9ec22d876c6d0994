"""`tests.evals.query_stages`: the per-stage split of invented reply timings."""

from __future__ import annotations

from tests.evals.query_stages import percentile, split


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0
    assert percentile([float(i) for i in range(1, 101)], 0.95) == 95.0


def test_split_gives_each_stage_and_its_share_of_the_totals_total_last() -> None:
    timings = [
        {"plan": 1.0, "recall": 6.0, "recall.embed": 2.0, "selection": 3.0, "total": 10.0},
        {"plan": 1.0, "recall": 14.0, "selection": 5.0, "total": 20.0},
    ]
    lines = split(timings)
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert [line.split()[0] for line in lines[1:]][-1] == "total"
    assert rows["recall"] == ["2", "10.0", "14.0", "10.0", "66.7%"]
    assert rows["recall.embed"][0] == "1" and rows["recall.embed"][-1] == "6.7%"
    assert rows["total"][-1] == "100.0%"
