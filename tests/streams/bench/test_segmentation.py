"""`lychee bench segmentation` on a tiny LoCoMo-layout file: the figures add up."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.bench.segmentation import segmentation
from streams.settings import Settings
from tests.streams.bench.files import OVERSIZED, SESSION_1, SESSION_2, write_locomo


def test_segmentation_figures_are_consistent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny-locomo.json"
    write_locomo(data, qa=())

    result = segmentation(Settings.load(None), data)

    exchanges = len(SESSION_1) + len(SESSION_2)
    assert result["conversations"] == 1
    assert result["sessions"] == 2
    assert result["exchanges"] == exchanges
    assert result["turns"] == exchanges
    assert result["embedding_texts_per_s"] > 0
    assert set(result["modes"]) == {"semantic", "fixed_window", "eager"}
    for mode, m in result["modes"].items():
        assert m["segments"] >= result["sessions"], mode  # a segment never spans sessions
        assert m["turns_in_segments"] == exchanges, mode  # every turn counted once
        assert sum(m["reasons"].values()) == m["segments"], mode
        assert m["turns_per_segment_mean"] == pytest.approx(exchanges / m["segments"]), mode
        assert m["tokens_per_segment_mean"] > 0, mode
    eager = result["modes"]["eager"]
    assert eager["segments"] == exchanges
    assert eager["reasons"] == {"per_exchange": exchanges}
    assert result["modes"]["semantic"]["segments"] <= exchanges

    out = capsys.readouterr().out
    assert "semantic" in out and "fixed_window" in out and "eager" in out


def test_segmentation_names_a_turn_the_contract_refuses_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny-locomo.json"
    write_locomo(data, qa=(), oversized=True)

    result = segmentation(Settings.load(None), data)

    assert result["exchanges"] == len(SESSION_1) + len(SESSION_2)  # all but the refused one
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"skipped {data}: namespace tiny, session session_1, turn {OVERSIZED}: "
        "content: 200,001 characters, at most 200,000",
        "1 message skipped: the contract refuses them (the rest was loaded)",
    ]


def test_segmentation_reads_a_json_lines_file_as_ingest_does(tmp_path: Path) -> None:
    """`.jsonl` is read as the JSON lines `lychee ingest` takes (the demo's conversation)."""
    demo = Path(__file__).resolve().parents[3] / "deploy" / "demo" / "conversation.jsonl"
    result = segmentation(Settings.load(None), demo)
    assert result["conversations"] == 1 and result["exchanges"] > 0
    assert segmentation(Settings.load(None), demo, "jsonl")["exchanges"] == result["exchanges"]
