"""The second-stage scorer: features read from a candidate, and the rescored order."""

from __future__ import annotations

import numpy as np

from workers.query.scorer import FEATURES, Scorer, features, question_terms, rescore
from workers.query.selection import Candidate, RouteRanking, fuse_routes


def cand(item_id: str, text: str, kind: str = "turn", **scores: float) -> Candidate:
    return Candidate(
        item_id=item_id, kind=kind, text=text, session_id="s1", turn_ids=(item_id,),
        channel_scores=scores,
    )  # fmt: skip


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
            features(terms, False, "record", "Ana is sleeping in a hostel in Bergen", {"turn_text": 2.0}, True),
            strict=True,
        )
    )  # fmt: skip
    assert row["names"] == 1.0  # Ana and Bergen, both in the text
    assert row["words"] == 1.0  # "sleep" and "sleeping" share their first five letters
    assert row["turn_text"] == np.log1p(2.0) and row["record_vector"] == 0.0
    assert (row["record"], row["window"], row["dated_for_when"]) == (1.0, 0.0, 0.0)


def test_rescore_puts_the_scorers_choice_first_and_keeps_the_fusion_score() -> None:
    route = RouteRanking(
        "r0",
        [cand("t1", "Ana painted the fence blue"), cand("t2", "Bruno fixed the ferry engine"),
         cand("t3", "The weather was grey")],
    )  # fmt: skip
    fused = fuse_routes([route])
    out = rescore(fused, "Who fixed the ferry engine?", False, only("words"), limit=2)
    assert [f.item_id for f in sorted(out, key=lambda f: -f.final)] == ["t2", "t1", "t3"]
    third = next(f for f in out if f.item_id == "t3")
    assert third.second == 0.0  # past the limit: below every scored candidate
    first = next(f for f in out if f.item_id == "t2")
    assert first.scores()["final"] == round(first.fused, 6) and "second" in first.scores()


def test_without_a_second_stage_final_is_the_fusion_score() -> None:
    (f,) = fuse_routes([RouteRanking("r0", [cand("t1", "Ana painted the fence")])])
    assert f.second is None and f.final == f.fused and "second" not in f.scores()
