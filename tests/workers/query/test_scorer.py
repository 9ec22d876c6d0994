"""The second-stage scorer: features read from a candidate, and the order it leads."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workers.query.errors import ScorerError
from workers.query.presets import Lead
from workers.query.scorer import (
    FEATURES,
    PROVENANCE,
    Scorer,
    features,
    lead,
    lead_order,
    load_scorer,
    question_terms,
)
from workers.query.selection import Candidate, FusedOrder, RouteRanking


def cand(item_id: str, text: str, kind: str = "turn", **scores: float) -> Candidate:
    return Candidate(
        item_id=item_id,
        kind=kind,
        text=text,
        session_id="s1",
        turn_ids=(item_id,),
        channel_scores=scores,
    )


def only(feature: str, weight: float = 1.0) -> Scorer:
    """A scorer that reads one feature, unscaled."""
    n = len(FEATURES)
    weights = tuple(weight if f == feature else 0.0 for f in FEATURES)
    return Scorer(weights, (0.0,) * n, (1.0,) * n)


def test_features_read_wording_names_channels_and_size() -> None:
    terms = question_terms("Where did Ana sleep in Bergen?")
    row = dict(
        zip(
            FEATURES,
            features(
                terms,
                False,
                "record",
                "Ana is sleeping in a hostel in Bergen",
                {"turn_text": 2.0},
                True,
            ),
            strict=True,
        )
    )
    assert row["names"] == 1.0  # Ana and Bergen, both in the text
    assert row["words"] == 1.0  # "sleep" and "sleeping" share their first five letters
    assert row["turn_text"] == math.log1p(2.0) and row["record_vector"] == 0.0
    assert (row["record"], row["window"], row["dated_for_when"]) == (1.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("log_odds", "how", "order"),
    [
        ([0.0, 3.0, -5.0, 2.0, 1.0], Lead(2, -1.0), [1, 3, 0, 2, 4]),  # the two best, in place
        ([0.0, 3.0, -5.0, 2.0, 1.0], Lead(2, 2.5), [1, 0, 2, 3, 4]),  # only one clears 2.5
        ([-4.0, -3.0], Lead(3, -1.0), [0, 1]),  # none clears: served order
    ],
)
def test_lead_moves_the_few_most_likely_ahead_and_keeps_the_rest_in_order(
    log_odds: list[float], how: Lead, order: list[int]
) -> None:
    assert lead_order(np.asarray(log_odds), how) == order


def test_lead_reorders_selections_choice_and_reports_the_probability() -> None:
    route = RouteRanking(
        "r0",
        [
            cand("t1", "Ana painted the fence blue"),
            cand("t2", "The weather was grey"),
            cand("t3", "Bruno fixed the ferry engine"),
        ],
    )
    chosen = list(FusedOrder([route]))
    out = lead(chosen, "Who fixed the ferry engine?", False, only("words", 10.0), Lead(1, 1.0))
    assert [f.item_id for f in out] == ["t3", "t1", "t2"]
    assert out[0].scores()["final"] == round(out[0].fused, 6)  # the fusion score is kept
    assert out[0].scores()["second"] > 0.99 and out[2].scores()["second"] == 0.5


def test_without_a_second_stage_final_is_the_fusion_score() -> None:
    (f,) = list(FusedOrder([RouteRanking("r0", [cand("t1", "Ana painted the fence")])]))
    assert f.second is None and "second" not in f.scores()


def written(path: Path) -> dict[str, Any]:
    """A scorer file as `Scorer.save` writes it (as `tests.evals.fit_scorer --out` does), read
    back as JSON."""
    n = len(FEATURES)
    Scorer((0.5,) * n, (0.0,) * n, (1.0,) * n, -2.0).save(path, {k: "x" for k in PROVENANCE})
    body: dict[str, Any] = json.loads(path.read_text())
    return body


def test_a_written_scorer_weighs_the_features_in_their_order_and_says_what_made_it(
    tmp_path: Path,
) -> None:
    body = written(tmp_path / "s.json")
    assert tuple(body["features"]) == FEATURES
    assert all(body[k] for k in PROVENANCE)
    scorer = load_scorer(tmp_path / "s.json")
    assert len(scorer.weights) == len(scorer.mean) == len(scorer.scale) == len(FEATURES)


def test_save_and_load_round_trip_every_float_exactly(tmp_path: Path) -> None:
    n = len(FEATURES)
    scorer = Scorer(
        tuple(0.1 * i for i in range(n)), (1 / 3,) * n, (2 / 7,) * n, -5.376158697849414
    )
    made = {k: "x" for k in PROVENANCE}
    scorer.save(tmp_path / "s.json", made)
    assert load_scorer(tmp_path / "s.json") == scorer
    with pytest.raises(ValueError, match="commit"):
        scorer.save(tmp_path / "t.json", {**made, "commit": ""})


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "No such file"),
        (lambda _: "not json", "JSONDecodeError"),
        (lambda _: "[1, 2]", "TypeError"),
        (lambda body: json.dumps({**body, "bias": None}), "TypeError"),
        (lambda body: json.dumps({k: v for k, v in body.items() if k != "scale"}), "scale"),
        (lambda body: json.dumps({**body, "features": list(reversed(FEATURES))}), "features"),
        (lambda body: json.dumps({**body, "weights": [1.0]}), "values per field"),
    ],
    ids=["missing", "not json", "not an object", "no bias", "no scale", "features", "short"],
)
def test_a_missing_or_malformed_scorer_file_is_refused_by_name(
    tmp_path: Path, content: Callable[[dict[str, Any]], str] | None, says: str
) -> None:
    path = tmp_path / "scorer.json"
    if content is not None:
        path.write_text(content(written(path)))
    with pytest.raises(ScorerError, match=f"{path}.*{says}"):
        load_scorer(path)
