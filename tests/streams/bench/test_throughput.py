"""`lychee bench throughput` end to end on a small run."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from streams.bench.throughput import file_exchanges, file_probe, throughput
from tests.streams.bench.files import write_locomo


@pytest.mark.integration
@pytest.mark.soak
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


@pytest.mark.integration
@pytest.mark.soak
def test_bench_throughput_on_a_file_ingests_its_exchanges_and_probes_with_them(
    tmp_path: Path,
) -> None:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    source = file_exchanges(data)
    assert {ex.namespace for ex in source} == {"bench-tiny"}
    (r,) = throughput(n=6, probes=3, data=data, probe_rate=5.0)
    assert r["source"] == "file" and r["exchanges"] == 6 and r["probe_rate"] == 5.0
    assert r["sessions"] == len({ex.session_id for ex in source[:6]})
    assert r["probes_missing"] == 0 and 0 < r["searchable_p50_ms"] <= r["searchable_p95_ms"]


def test_a_file_probe_is_the_files_exchange_in_a_session_of_its_own(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    source = file_exchanges(data)
    probe = file_probe(source, len(source) + 1, random.Random(0))  # cycled
    original = source[1]
    assert probe.namespace == "probe" and probe.session_id == f"p{len(source) + 1}"
    assert [t.content for t in probe.turns] == [t.content for t in original.turns]
    assert probe.turns[0].turn_id == f"probe-{len(source) + 1}"
    assert len({t.turn_id for t in probe.turns}) == len(probe.turns)
