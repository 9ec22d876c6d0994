"""`lychee bench throughput` end to end on a small run."""

from __future__ import annotations

import pytest

from streams.bench.throughput import throughput

pytestmark = pytest.mark.integration


def test_bench_throughput_reports_rates_and_embeddings_per_exchange() -> None:
    (r,) = throughput(n=40, sessions=4, probes=2)
    assert r["stack"] == "ephemeral" and r["exchanges"] == 40
    assert r["exchanges_per_s"] > 0 and r["raw_embedding_texts_per_s"] > 0
    assert r["ratio_end_to_end_to_raw"] == pytest.approx(
        r["exchanges_per_s"] / r["raw_embedding_texts_per_s"]
    )
    # the segmenter embeds each exchange once (its turn keeps that vector): exactly 1.0 of
    # them; more shows the indexer's records and nodes counted too
    assert 1.0 < r["embeddings_per_exchange"] < 20.0
    assert r["probes_missing"] == 0 and 0 < r["searchable_p50_ms"] <= r["searchable_p95_ms"]
