"""The boundary signals of online semantic segmentation (paper §3.2, App. C.1).

Pure functions over unit-normalized numpy vectors, so each can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from workers.segmenter.params import SegmenterParams, SurpriseCalibration

Vector = NDArray[np.float32]


def cosine(a: Vector, b: Vector) -> float:
    na = float(np.linalg.norm(a))
    nb = float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b)) / (na * nb)


def surprise(e: Vector, centroid: Vector, last: Vector) -> float:
    """`s = 1 - max(cos(e, c), cos(e, h))`: new against both topic and trajectory."""
    return 1.0 - max(cosine(e, centroid), cosine(e, last))


def robust_surprise(s: float, history: Sequence[float], p: SegmenterParams) -> float:
    """Median/MAD z-score of `s` against the history, clipped; 0 while the history is short."""
    if len(history) < p.min_history:
        return 0.0
    h = np.asarray(history, dtype=np.float64)
    med = float(np.median(h))
    mad = float(np.median(np.abs(h - med)))
    z = (s - med) / (p.mad_scale * mad + 1e-6)
    return float(np.clip(z, p.robust_low, p.robust_high))


def absolute_surprise(s: float, cal: SurpriseCalibration) -> float:
    return float(np.clip((s - cal.center) / cal.scale, cal.low, cal.high))


def cohesion(vector_sum: Vector, n: int) -> float:
    """`Coh(V) = mean cos(v, centroid(V))`, which for unit vectors equals `|sum V| / |V|`.

    (sum_v v.c/|c| with c = sum/n is |sum|), so the state needs only the running sum.
    """
    if n <= 0:
        return 0.0
    return float(np.linalg.norm(vector_sum)) / n


def cohesion_drop(vector_sum: Vector, n: int, e: Vector) -> float:
    """`d = max(0, Coh(S) - Coh(S u {x}))`."""
    return max(0.0, cohesion(vector_sum, n) - cohesion(vector_sum + e, n + 1))


def cohesion_term(d: float, p: SegmenterParams) -> float:
    return min(p.cohesion_cap, d / p.cohesion_scale)


def _lerp(x: float, x0: float, x1: float, y0: float, y1: float) -> float:
    if x1 <= x0:
        return y1
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def length_pressure(tokens: int, p: SegmenterParams) -> float:
    """Piecewise pressure over the active segment's token count (App. C.1)."""
    lo, mid, hi = p.min_tokens, p.target_tokens, p.max_tokens
    t = float(tokens)
    if t >= hi:
        return 3.0
    if t < 0.7 * lo:
        return -1.30
    if t < lo:
        return _lerp(t, 0.7 * lo, lo, -0.80, 0.0)
    if t < mid:
        return _lerp(t, lo, mid, 0.45, 1.90)
    return _lerp(t, mid, hi, 1.90, 2.80)


def turn_pressure(n: int) -> float:
    """Pressure over the active segment's exchange count."""
    if n <= 1:
        return -0.85
    if n == 2:
        return -0.15
    if n == 3:
        return 0.15
    return min(1.0, 0.30 + 0.15 * (n - 4))


def combined_score(
    a: float, z: float, c: float, length: float, turns: float, p: SegmenterParams
) -> float:
    """`0.65*max(A, 0.45*z) + 0.45*C + 0.90*L + 0.30*N`."""
    return (
        p.w_surprise * max(a, p.w_robust * z)
        + p.w_cohesion * c
        + p.w_length * length
        + p.w_turns * turns
    )


def p_cut(score: float, p: SegmenterParams) -> float:
    """`sigmoid(bias + score)`."""
    x = p.bias + score
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    ex = math.exp(x)
    return ex / (1.0 + ex)
