"""`lychee bench chaos` on a small conversation: worker kills plus one kill -9 of Redis and
one of the broker on the durable stack, and nothing lost or duplicated."""

from __future__ import annotations

import pytest

from streams.bench.chaos import format_report, jaccard, run_chaos, synthetic


def test_jaccard() -> None:
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 1.0


@pytest.mark.integration
@pytest.mark.soak
def test_chaos_kills_workers_redis_and_the_broker_and_loses_nothing() -> None:
    exchanges = synthetic("chaos-t", sessions=3, per_session=8)
    report = run_chaos(exchanges, kills=3, processes=1, interval_s=3.0, seed=3, undisturbed=1)
    text = format_report(report)
    assert report.stack == "durable" and report.kills == 3 and report.infra_kills == 2, text
    assert any("kill -9 redis" in line for line in report.kill_log), report.kill_log
    assert any("kill -9 broker" in line for line in report.kill_log), report.kill_log
    assert report.produced_turns == report.indexed_turns == 24, text
    assert report.duplicate_turn_rows == report.duplicate_record_rows == 0, text
    assert report.exchanges_in_no_segment == report.exchanges_in_two_segments == 0, text
    assert report.record_batches_differing == 0 and report.dead_letters == 0, text
    assert report.segments_with_records == report.distinct_segments > 0, text
    # each segment encoded and counted once, whatever was killed in between
    assert report.segments_encoded == report.segments_counted == report.distinct_segments, text
    assert report.records[0] > 0 and report.records[-1] > 0, text
    assert report.jaccard_vs_undisturbed is not None and report.jaccard_noise_floor is None
    assert "record-set Jaccard" in text
