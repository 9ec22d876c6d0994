"""`lychee bench segmentation` on a tiny LoCoMo-layout file: the figures add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.bench import segmentation
from streams.settings import Settings

SESSION_1 = [
    ("Mara", "I finally planted the tomato seedlings on the balcony this morning, six of them."),
    ("Jonas", "Nice! Which variety did you go for in the end?"),
    (
        "Mara",
        "Two San Marzano and four cherry tomatoes, the yellow kind from the market on Elm Street.",
    ),
    ("Jonas", "Do they get enough sun up there? Your balcony faces west, right?"),
    (
        "Mara",
        "About five hours of afternoon sun. I bought a second planter box to move them around.",
    ),
    ("Jonas", "By the way, did you book the train tickets for the jazz festival in Montreux?"),
    (
        "Mara",
        "Yes, July 6th, the 8:12 train, and I reserved seats on the left side for the lake view.",
    ),
    ("Jonas", "Perfect, I'll bring the picnic blanket and the folding chairs."),
]
SESSION_2 = [
    (
        "Jonas",
        "The festival was incredible. That trio on the lakeside stage on Saturday night was my favourite.",
    ),
    ("Mara", "Same! The double bass player had a solo that went on for ten minutes."),
    ("Jonas", "How are the tomatoes doing after the heatwave last week?"),
    ("Mara", "The cherry ones are fine, but one San Marzano wilted. I water them twice a day now."),
    ("Jonas", "My uncle swears by mulching with straw to keep the soil from drying out."),
    ("Mara", "Good idea, I'll try it this weekend. I also started a small basil pot next to them."),
    ("Jonas", "Basil and tomatoes, you are one mozzarella away from a caprese salad."),
    ("Mara", "That is exactly the plan for the first harvest in August."),
]


def _write_locomo(path: Path) -> None:
    def turns(session: int, rows: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [
            {"speaker": s, "dia_id": f"D{session}:{i}", "text": t}
            for i, (s, t) in enumerate(rows, 1)
        ]

    sample = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Mara",
            "speaker_b": "Jonas",
            "session_1_date_time": "6:10 pm on 2 June, 2024",
            "session_1": turns(1, SESSION_1),
            "session_2_date_time": "11:45 am on 14 July, 2024",
            "session_2": turns(2, SESSION_2),
        },
        "qa": [],
    }
    path.write_text(json.dumps([sample]))


def test_segmentation_figures_are_consistent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny-locomo.json"
    _write_locomo(data)

    result = segmentation(Settings(_env_file=None), data)  # type: ignore[call-arg]

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
