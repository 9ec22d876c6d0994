"""The boundary signals of DESIGN §5, each checked against numbers worked out by hand.

Every expected value below is a literal or a literal arithmetic expression taken from the
formula in DESIGN §5; none is obtained by calling the function under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workers.segmenter import signals as sig
from workers.segmenter.params import PAPER_CALIBRATION, SegmenterParams, SurpriseCalibration

P = SegmenterParams()  # min/target/max 300/600/900, weights of the authors' code
CAL = SurpriseCalibration(center=0.20, scale=0.14)  # the paper's calibration


def v(*xs: float) -> np.ndarray:
    return np.asarray(xs, dtype=np.float32)


def unit(*xs: float) -> np.ndarray:
    a = np.asarray(xs, dtype=np.float64)
    return (a / np.linalg.norm(a)).astype(np.float32)


# -- defaults --------------------------------------------------------------------------


def test_defaults_are_the_design_constants() -> None:
    assert (P.min_tokens, P.target_tokens, P.max_tokens, P.max_exchanges) == (300, 600, 900, 10)
    assert P.delta == 0.50 and P.bias == -1.10
    assert (P.w_surprise, P.w_robust, P.w_cohesion, P.w_length, P.w_turns) == (
        0.65,
        0.45,
        0.45,
        0.90,
        0.30,
    )
    assert (P.cohesion_scale, P.cohesion_cap) == (0.06, 2.5)
    assert (P.history_size, P.min_history, P.mad_scale) == (64, 5, 1.4826)
    assert (P.robust_low, P.robust_high) == (-2.0, 4.0)
    assert (PAPER_CALIBRATION.center, PAPER_CALIBRATION.scale) == (0.20, 0.14)
    assert (PAPER_CALIBRATION.low, PAPER_CALIBRATION.high) == (-1.0, 2.5)


def test_explicit_calibration_wins_over_the_model_table() -> None:
    p = SegmenterParams(calibration=CAL)
    assert p.calibration_for("all-MiniLM-L6-v2") == CAL
    assert SegmenterParams().calibration_for("openai/text-embedding-3-small") == PAPER_CALIBRATION
    assert SegmenterParams().calibration_for("some-unknown-model") == PAPER_CALIBRATION


# -- cosine ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((1, 0), (0, 1), 0.0),  # orthogonal
        ((1, 0), (1, 0), 1.0),  # identical
        ((1, 0), (-1, 0), -1.0),  # opposite
        ((1, 1), (1, 0), 1 / math.sqrt(2)),  # 45 degrees
        ((3, 4), (4, 3), (3 * 4 + 4 * 3) / (5 * 5)),  # 24/25 = 0.96, not unit-length
        ((2, 0, 0), (0.5, 0.5, 0.5), 1 / math.sqrt(3)),  # (2*0.5)/(2*sqrt(0.75))
        ((0, 0), (1, 0), 0.0),  # a zero vector has no direction: 0 by convention
    ],
)
def test_cosine(a: tuple[float, ...], b: tuple[float, ...], expected: float) -> None:
    assert sig.cosine(v(*a), v(*b)) == pytest.approx(expected, abs=1e-6)


# -- surprise --------------------------------------------------------------------------


def test_surprise_takes_the_closer_of_centroid_and_last() -> None:
    e = v(1, 0, 0)
    c = v(0.6, 0.8, 0)  # cos(e, c) = 0.6
    h = v(0, 1, 0)  # cos(e, h) = 0
    # s = 1 - max(0.6, 0) = 0.4
    assert sig.surprise(e, c, h) == pytest.approx(1 - 0.6, abs=1e-6)
    # e equal to the last exchange: s = 1 - max(0.8, 1) = 0
    assert sig.surprise(v(0, 1, 0), c, h) == pytest.approx(0.0, abs=1e-6)


def test_surprise_orthogonal_and_opposite() -> None:
    # orthogonal to both: s = 1 - max(0, 0) = 1
    assert sig.surprise(v(0, 0, 1), v(1, 0, 0), v(0, 1, 0)) == pytest.approx(1.0, abs=1e-6)
    # opposite to both: s = 1 - max(-1, -1) = 2
    assert sig.surprise(v(-1, 0), v(1, 0), v(1, 0)) == pytest.approx(2.0, abs=1e-6)


def test_surprise_3d_diagonal() -> None:
    e = unit(1, 1, 1)  # cos with any basis vector = 1/sqrt(3)
    assert sig.surprise(e, v(1, 0, 0), v(0, 1, 0)) == pytest.approx(1 - 1 / math.sqrt(3), abs=1e-6)


def test_surprise_centroid_need_not_be_unit() -> None:
    # the policy passes sum/n, which is shorter than 1 when the segment is spread out;
    # cos((1,0),(0.3,0.4)) = 0.3/0.5 = 0.6 -> s = 0.4
    assert sig.surprise(v(1, 0), v(0.3, 0.4), v(0, 1)) == pytest.approx(0.4, abs=1e-6)


# -- robust surprise -------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_robust_surprise_is_zero_while_history_is_short(n: int) -> None:
    history = [0.1, 0.5, 0.9, 0.2][:n]
    assert sig.robust_surprise(10.0, history, P) == 0.0
    assert sig.robust_surprise(-10.0, history, P) == 0.0


def test_robust_surprise_known_median_and_mad() -> None:
    history = [1.0, 2.0, 3.0, 4.0, 5.0]
    # median 3; |h - 3| = [2, 1, 0, 1, 2] -> MAD = 1
    # s = 3 + 1.4826 -> z = 1.4826 / (1.4826 * 1 + 1e-6)
    expected = 1.4826 / (1.4826 + 1e-6)
    assert sig.robust_surprise(3 + 1.4826, history, P) == pytest.approx(expected, rel=1e-9)
    # s = 3 -> z = 0
    assert sig.robust_surprise(3.0, history, P) == pytest.approx(0.0, abs=1e-12)
    # s = 2 -> z = -1 / 1.482601
    assert sig.robust_surprise(2.0, history, P) == pytest.approx(-1 / 1.482601, rel=1e-9)


def test_robust_surprise_even_history_order_does_not_matter() -> None:
    history = [0.6, 0.1, 0.4, 0.3, 0.5, 0.2]
    # sorted 0.1..0.6: median (0.3 + 0.4) / 2 = 0.35
    # |h - 0.35| sorted = [0.05, 0.05, 0.15, 0.15, 0.25, 0.25] -> MAD = 0.15
    # s = 0.5 -> z = 0.15 / (1.4826 * 0.15 + 1e-6) = 0.15 / 0.222391
    expected = 0.15 / (1.4826 * 0.15 + 1e-6)
    assert sig.robust_surprise(0.5, history, P) == pytest.approx(expected, rel=1e-6)


def test_robust_surprise_clips_at_minus_2_and_4() -> None:
    history = [1.0, 2.0, 3.0, 4.0, 5.0]  # median 3, MAD 1
    # s = 3 + 10*1.4826 -> z ~ 10 -> clipped to 4
    assert sig.robust_surprise(3 + 10 * 1.4826, history, P) == 4.0
    # s = 3 - 10*1.4826 -> z ~ -10 -> clipped to -2
    assert sig.robust_surprise(3 - 10 * 1.4826, history, P) == -2.0
    # inside the band: s = 3 + 3.5*1.4826 -> z ~ 3.5 (not clipped)
    assert sig.robust_surprise(3 + 3.5 * 1.4826, history, P) == pytest.approx(3.5, rel=1e-5)
    # s = 3 - 1.9*1.4826 -> z ~ -1.9 (not clipped)
    assert sig.robust_surprise(3 - 1.9 * 1.4826, history, P) == pytest.approx(-1.9, rel=1e-5)


def test_robust_surprise_mad_zero() -> None:
    history = [0.3] * 5  # median 0.3, MAD 0: denominator is the 1e-6 guard alone
    assert sig.robust_surprise(0.3, history, P) == 0.0  # (0.3 - 0.3) / 1e-6 = 0
    # (0.3 + 5e-7 - 0.3) / 1e-6 = 0.5
    assert sig.robust_surprise(0.3 + 5e-7, history, P) == pytest.approx(0.5, rel=1e-6)
    # any visible difference saturates: (0.31 - 0.3) / 1e-6 = 1e4 -> 4; -1e4 -> -2
    assert sig.robust_surprise(0.31, history, P) == 4.0
    assert sig.robust_surprise(0.29, history, P) == -2.0


def test_robust_surprise_follows_params() -> None:
    p = SegmenterParams(min_history=2, robust_low=-1.0, robust_high=1.0)
    # history [0, 2]: median 1, |h - 1| = [1, 1] -> MAD 1; s = 1.5 -> 0.5 / 1.482601
    assert sig.robust_surprise(1.5, [0.0, 2.0], p) == pytest.approx(0.5 / 1.482601, rel=1e-9)
    assert sig.robust_surprise(100.0, [0.0, 2.0], p) == 1.0
    assert sig.robust_surprise(-100.0, [0.0, 2.0], p) == -1.0
    assert sig.robust_surprise(100.0, [0.0], p) == 0.0


# -- absolute surprise -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        (0.20, 0.0),  # (0.20 - 0.20) / 0.14
        (0.27, 0.5),  # 0.07 / 0.14
        (0.34, 1.0),  # 0.14 / 0.14
        (0.41, 1.5),  # 0.21 / 0.14
        (0.13, -0.5),  # -0.07 / 0.14
        (0.06, -1.0),  # -0.14 / 0.14: exactly at the lower clip
        (0.55, 2.5),  # 0.35 / 0.14: exactly at the upper clip
        (0.0, -1.0),  # -0.20 / 0.14 = -1.43 -> clipped to -1
        (-1.0, -1.0),  # far below -> -1
        (1.0, 2.5),  # 0.80 / 0.14 = 5.71 -> clipped to 2.5
        (2.0, 2.5),
    ],
)
def test_absolute_surprise_paper_calibration(s: float, expected: float) -> None:
    assert sig.absolute_surprise(s, CAL) == pytest.approx(expected, abs=1e-9)
    assert sig.absolute_surprise(s, PAPER_CALIBRATION) == pytest.approx(expected, abs=1e-9)


def test_absolute_surprise_other_calibration() -> None:
    cal = SurpriseCalibration(center=0.40, scale=0.10)
    assert sig.absolute_surprise(0.55, cal) == pytest.approx(1.5)  # 0.15 / 0.10
    assert sig.absolute_surprise(0.0, cal) == -1.0  # -4 -> -1
    assert sig.absolute_surprise(1.0, cal) == 2.5  # 6 -> 2.5


# -- cohesion --------------------------------------------------------------------------


def _coh_by_definition(vectors: np.ndarray) -> float:
    """mean over v of cos(v, centroid), written out explicitly."""
    c = vectors.mean(axis=0)
    cos = [float(x @ c) / (np.linalg.norm(x) * np.linalg.norm(c)) for x in vectors]
    return float(np.mean(cos))


@pytest.mark.parametrize(("seed", "n", "dim"), [(0, 1, 3), (1, 2, 3), (2, 5, 8), (3, 12, 16)])
def test_cohesion_matches_definition_on_random_unit_vectors(seed: int, n: int, dim: int) -> None:
    rng = np.random.default_rng(seed)
    vs = rng.normal(size=(n, dim))
    vs = vs / np.linalg.norm(vs, axis=1, keepdims=True)
    expected = _coh_by_definition(vs)
    got = sig.cohesion(vs.sum(axis=0).astype(np.float32), n)
    assert got == pytest.approx(expected, abs=1e-6)


def test_cohesion_by_hand() -> None:
    e0, e1 = v(1, 0, 0), v(0, 1, 0)
    assert sig.cohesion(e0, 1) == pytest.approx(1.0)  # one vector: cos(v, v) = 1
    assert sig.cohesion(e0 + e0 + e0, 3) == pytest.approx(1.0)  # identical vectors
    # two orthogonal: centroid (0.5, 0.5), each cos = 0.5 / (1 * sqrt(0.5)) = sqrt(2)/2
    assert sig.cohesion(e0 + e1, 2) == pytest.approx(math.sqrt(2) / 2)
    # (1,0) and (0.6,0.8): sum (1.6, 0.8), |sum| / 2 = sqrt(3.2) / 2
    assert sig.cohesion(v(1.6, 0.8), 2) == pytest.approx(math.sqrt(3.2) / 2, rel=1e-6)
    assert sig.cohesion(v(0, 0, 0), 0) == 0.0  # empty segment


def test_cohesion_drop_positive_case() -> None:
    # S = {e0}: Coh 1; S u {e1}: sqrt(2)/2 -> d = 1 - sqrt(2)/2 = 0.292893
    d = sig.cohesion_drop(v(1, 0, 0), 1, v(0, 1, 0))
    assert d == pytest.approx(1 - math.sqrt(2) / 2, rel=1e-6)
    # S = {e0, e0, e0}, x = (0.6, 0.8): Coh(S u x) = |(3.6, 0.8)| / 4 = sqrt(13.6) / 4
    d = sig.cohesion_drop(v(3, 0), 3, v(0.6, 0.8))
    assert d == pytest.approx(1 - math.sqrt(13.6) / 4, rel=1e-6)


def test_cohesion_drop_is_never_negative() -> None:
    # S = {e0, e1}: Coh = sqrt(2)/2 = 0.7071. x along the centroid (e0+e1)/sqrt(2):
    # sum = (1 + 1/sqrt2)(e0 + e1), |sum| = sqrt2 + 1, Coh = (sqrt2 + 1)/3 = 0.8047 > 0.7071
    # -> Coh(S) - Coh(S u x) = -0.0976 < 0, so d = 0
    x = unit(1, 1, 0)
    assert sig.cohesion_drop(v(1, 1, 0), 2, x) == 0.0
    # identical to a single-vector segment: 1 - 1 = 0
    assert sig.cohesion_drop(v(1, 0), 1, v(1, 0)) == 0.0
    rng = np.random.default_rng(7)
    for _ in range(50):
        vs = rng.normal(size=(int(rng.integers(1, 6)), 4))
        vs = vs / np.linalg.norm(vs, axis=1, keepdims=True)
        x = rng.normal(size=4)
        x = x / np.linalg.norm(x)
        assert sig.cohesion_drop(vs.sum(axis=0), len(vs), x) >= 0.0


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (0.0, 0.0),
        (0.03, 0.5),  # 0.03 / 0.06
        (0.06, 1.0),
        (0.12, 2.0),
        (0.15, 2.5),  # 0.15 / 0.06 = 2.5: at the cap
        (0.3, 2.5),  # 5.0 -> cap 2.5
        (1 - math.sqrt(2) / 2, 2.5),  # 0.2929 / 0.06 = 4.88 -> 2.5
    ],
)
def test_cohesion_term(d: float, expected: float) -> None:
    assert sig.cohesion_term(d, P) == pytest.approx(expected, abs=1e-9)


# -- length pressure -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (0, -1.30),
        (100, -1.30),
        (209, -1.30),  # below 0.7 * 300 = 210
        (210, -0.80),  # start of the -0.80 -> 0 piece
        (255, -0.40),  # -0.80 + 0.80 * 45/90
        (299, -0.80 + 0.80 * 89 / 90),  # -0.00889
        (300, 0.45),  # min: jumps to 0.45
        (450, 1.175),  # 0.45 + 1.45 * 150/300
        (599, 0.45 + 1.45 * 299 / 300),  # 1.89517
        (600, 1.90),  # target
        (750, 2.35),  # 1.90 + 0.90 * 150/300
        (899, 1.90 + 0.90 * 299 / 300),  # 2.797
        (900, 3.0),  # at max
        (901, 3.0),  # past max
        (5000, 3.0),
    ],
)
def test_length_pressure(tokens: int, expected: float) -> None:
    assert sig.length_pressure(tokens, P) == pytest.approx(expected, abs=1e-9)


def test_length_pressure_follows_params() -> None:
    p = SegmenterParams(min_tokens=100, target_tokens=200, max_tokens=300)
    assert sig.length_pressure(69, p) == -1.30  # below 0.7 * 100 = 70
    assert sig.length_pressure(70, p) == pytest.approx(-0.80)
    assert sig.length_pressure(100, p) == pytest.approx(0.45)
    assert sig.length_pressure(150, p) == pytest.approx(1.175)  # 0.45 + 1.45 * 50/100
    assert sig.length_pressure(250, p) == pytest.approx(2.35)  # 1.90 + 0.90 * 50/100
    assert sig.length_pressure(300, p) == 3.0


def test_length_pressure_is_monotone() -> None:
    values = [sig.length_pressure(t, P) for t in range(0, 1000)]
    assert all(b >= a - 1e-12 for a, b in zip(values, values[1:], strict=False))


# -- turn pressure ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, -0.85),
        (1, -0.85),
        (2, -0.15),
        (3, 0.15),
        (4, 0.30),  # 0.30 + 0.15 * 0
        (5, 0.45),  # 0.30 + 0.15 * 1
        (6, 0.60),
        (7, 0.75),
        (8, 0.90),  # 0.30 + 0.15 * 4
        (9, 1.0),  # 0.30 + 0.15 * 5 = 1.05 -> capped at 1.0
        (10, 1.0),
        (50, 1.0),
    ],
)
def test_turn_pressure(n: int, expected: float) -> None:
    assert sig.turn_pressure(n) == pytest.approx(expected, abs=1e-12)


# -- combined score and P_cut ----------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "z", "c", "length", "turns", "expected"),
    [
        # robust term wins: max(1, 0.45*3 = 1.35) = 1.35
        # 0.65*1.35 + 0.45*2 + 0.90*0.45 + 0.30*0.15 = 0.8775 + 0.9 + 0.405 + 0.045
        (1.0, 3.0, 2.0, 0.45, 0.15, 2.2275),
        # absolute term wins: max(2, 0.45) = 2 -> 1.3 + 0 + 0 + 0
        (2.0, 1.0, 0.0, 0.0, 0.0, 1.3),
        # both negative: max(-1, 0.45*-2 = -0.9) = -0.9 -> -0.585
        (-1.0, -2.0, 0.0, 0.0, 0.0, -0.585),
        # quiet start: max(-1, 0) = 0; 0.90*-1.30 + 0.30*-0.85 = -1.17 - 0.255
        (-1.0, 0.0, 0.0, -1.30, -0.85, -1.425),
        # everything at its cap: 0.65*2.5 + 0.45*2.5 + 0.90*3 + 0.30*1 = 1.625+1.125+2.7+0.3
        (2.5, 4.0, 2.5, 3.0, 1.0, 5.75),
    ],
)
def test_combined_score(
    a: float, z: float, c: float, length: float, turns: float, expected: float
) -> None:
    assert sig.combined_score(a, z, c, length, turns, P) == pytest.approx(expected, abs=1e-12)


def test_p_cut_is_half_at_score_1_10() -> None:
    assert sig.p_cut(1.10, P) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (0.0, 1 / (1 + math.exp(1.10))),  # 0.249740
        (2.2, 1 / (1 + math.exp(-1.10))),  # 0.750260
        (1.10 + math.log(3), 0.75),  # sigmoid(ln 3) = 3/4
        (1.10 - math.log(3), 0.25),
        (-1.425, 1 / (1 + math.exp(2.525))),  # 0.074
    ],
)
def test_p_cut(score: float, expected: float) -> None:
    assert sig.p_cut(score, P) == pytest.approx(expected, rel=1e-12)


def test_p_cut_extremes_do_not_overflow() -> None:
    assert sig.p_cut(1e4, P) == 1.0
    assert sig.p_cut(-1e4, P) == 0.0
    assert 0.0 < sig.p_cut(-700.0, P) < 1e-300


def test_p_cut_follows_bias() -> None:
    p = SegmenterParams(bias=0.0)
    assert sig.p_cut(0.0, p) == 0.5
