"""Algorithm 1's decision order, driven by hand-made embeddings and a word counter.

Embeddings are basis vectors of R^8 (or simple mixes of two of them), the token counter
is `len(text.split())`, so an exchange rendered as "Ann: w w ... w" with k words costs
k + 1 tokens. Every expected cut/no-cut is worked out in the comments from DESIGN §5:

    s = 1 - max(cos(e, c), cos(e, h))
    z = 0 while the history has < 5 values
    A = clip((s - 0.20) / 0.14, -1, 2.5)
    C = min(2.5, max(0, Coh(S) - Coh(S u x)) / 0.06), Coh = |sum| / n for unit vectors
    score = 0.65 max(A, 0.45 z) + 0.45 C + 0.90 L + 0.30 N;  P_cut = sigmoid(-1.10 + score)
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pytest

from schemas import Exchange, FinalizeReason, Role, Segment, SegmentMode, Turn
from schemas.exchange import turn_text
from workers.segmenter.params import SegmenterParams, SurpriseCalibration
from workers.segmenter.policy import SegmentPolicy, SessionState

CAL = SurpriseCalibration(center=0.20, scale=0.14)
DIM = 8


def count(text: str) -> int:
    return len(text.split())


def basis(i: int) -> np.ndarray:
    e = np.zeros(DIM, dtype=np.float32)
    e[i] = 1.0
    return e


def mix(i: int, a: float, j: int, b: float) -> np.ndarray:
    e = np.zeros(DIM, dtype=np.float32)
    e[i], e[j] = a, b
    return e


E0, E1, E2, E3 = basis(0), basis(1), basis(2), basis(3)


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def make_policy(**kw: object) -> SegmentPolicy:
    params = SegmenterParams(calibration=CAL, **kw)  # type: ignore[arg-type]
    return SegmentPolicy(params, params.calibration_for("any-model"), count)


def new_state() -> SessionState:
    return SessionState(namespace="ns", session_id="s1")


def ex(
    seq: int, tokens: int = 10, *, content: str | None = None, date: datetime | None = None
) -> Exchange:
    """One exchange of `tokens` tokens under the word counter ("Ann:" is one of them)."""
    speaker = "Ann" if seq % 2 == 0 else "Bob"
    text = content if content is not None else " ".join(["w"] * (tokens - 1))
    return Exchange(
        namespace="ns",
        session_id="s1",
        seq=seq,
        exchange_id=f"x{seq}",
        session_date=date,
        turns=[Turn(role=Role.user, speaker=speaker, content=text, turn_id=f"D1:{seq}")],
    )


class Runner:
    """Feeds exchanges with increasing seq and collects finalized segments."""

    def __init__(self, policy: SegmentPolicy) -> None:
        self.policy = policy
        self.state = new_state()
        self.seq = 0
        self.segments: list[Segment] = []

    def step(self, emb: np.ndarray, tokens: int = 10, **kw: object):  # type: ignore[no-untyped-def]
        d = self.policy.step(self.state, ex(self.seq, tokens, **kw), emb, now=float(self.seq))  # type: ignore[arg-type]
        self.seq += 1
        self.segments += d.finalized
        return d

    def flush(self) -> list[Segment]:
        out = self.policy.flush(self.state)
        self.segments += out
        return out


def open_ids(state: SessionState) -> list[str]:
    return [x.exchange_id for x in state.exchanges]


# -- start / append --------------------------------------------------------------------


def test_first_exchange_starts_the_segment() -> None:
    r = Runner(make_policy())
    d = r.step(E0, 10)
    assert d.action == "start"
    assert d.finalized == [] and d.signals is None
    assert open_ids(r.state) == ["x0"]
    assert r.state.tokens == 10
    assert r.state.last_seq == 0
    assert r.state.vector_sum == pytest.approx(list(E0))
    assert r.state.history == []  # no signals for the first exchange


def test_identical_embedding_appends() -> None:
    r = Runner(make_policy())
    r.step(E0, 10)
    d = r.step(E0, 10)
    # s = 1 - 1 = 0; z = 0; A = clip(-0.20/0.14 = -1.43) = -1; max(A, 0) = 0
    # C = 0 (Coh 1 -> 1); L(10) = -1.30; N(1) = -0.85
    # score = 0.90*-1.30 + 0.30*-0.85 = -1.425; P = sigmoid(-2.525) = 0.074 < 0.5
    assert d.action == "append" and d.finalized == []
    sg = d.signals
    assert sg is not None
    assert sg.surprise == pytest.approx(0.0, abs=1e-6)
    assert sg.absolute_surprise == pytest.approx(-1.0)
    assert sg.robust_surprise == 0.0
    assert sg.cohesion_drop == pytest.approx(0.0, abs=1e-6)
    assert sg.length_pressure == pytest.approx(-1.30)
    assert sg.turn_pressure == pytest.approx(-0.85)
    assert sg.score == pytest.approx(-1.425, abs=1e-5)
    assert sg.p_cut == pytest.approx(sigmoid(-2.525), abs=1e-5)
    assert open_ids(r.state) == ["x0", "x1"]
    assert r.state.tokens == 20
    assert r.state.vector_sum == pytest.approx(list(2 * E0))


# -- semantic boundary -----------------------------------------------------------------


def _three_e0(r: Runner, tokens: int) -> None:
    """Open a segment of three identical e0 exchanges (no cut on the way).

    2nd: L(t) with t < 210 -> -1.30, N(1) -> score -1.425, P 0.074: append.
    3rd: L(2t) with 2t < 210 -> -1.30, N(2) = -0.15 -> score -1.17 - 0.045 = -1.215,
         P = sigmoid(-2.315) = 0.090: append.
    """
    assert 2 * tokens < 210
    for _ in range(3):
        d = r.step(E0, tokens)
        assert d.finalized == []


def test_partial_shift_after_few_tokens_appends() -> None:
    r = Runner(make_policy())
    _three_e0(r, 10)  # 30 tokens
    # x = 0.6 e0 + 0.8 e1 against S = {e0, e0, e0}: s = 1 - 0.6 = 0.4
    # A = (0.4 - 0.20)/0.14 = 1.428571; z = 0 (history has 2 values)
    # Coh(S) = 1, Coh(S u x) = |(3.6, 0.8)|/4 = sqrt(13.6)/4 = 0.921954 -> d = 0.078046
    # C = 0.078046/0.06 = 1.300763; L(30) = -1.30; N(3) = 0.15
    # score = 0.65*1.428571 + 0.45*1.300763 - 1.17 + 0.045 = 0.388914
    # P = sigmoid(-0.711086) = 0.3294 < 0.5: append
    d = r.step(mix(0, 0.6, 1, 0.8), 10)
    a = (0.4 - 0.20) / 0.14
    c = (1 - math.sqrt(13.6) / 4) / 0.06
    score = 0.65 * a + 0.45 * c + 0.90 * -1.30 + 0.30 * 0.15
    assert d.action == "append" and d.finalized == []
    assert d.signals is not None
    assert d.signals.surprise == pytest.approx(0.4, abs=1e-5)
    assert d.signals.cohesion_term == pytest.approx(c, abs=1e-4)
    assert d.signals.score == pytest.approx(score, abs=1e-4)
    assert d.signals.p_cut == pytest.approx(sigmoid(-1.10 + score), abs=1e-4)
    assert d.signals.p_cut < 0.5
    assert len(r.state.exchanges) == 4


def test_partial_shift_after_enough_tokens_cuts() -> None:
    r = Runner(make_policy())
    _three_e0(r, 100)  # 300 tokens
    # same x as above, but L(300) = 0.45:
    # score = 0.928571 + 0.585343 + 0.90*0.45 + 0.045 = 1.963914
    # P = sigmoid(0.863914) = 0.7035 >= 0.5: semantic boundary
    x = mix(0, 0.6, 1, 0.8)
    d = r.step(x, 10)
    a = (0.4 - 0.20) / 0.14
    c = (1 - math.sqrt(13.6) / 4) / 0.06
    score = 0.65 * a + 0.45 * c + 0.90 * 0.45 + 0.30 * 0.15
    assert d.action == "cut"
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.semantic_boundary
    assert seg.signals is not None
    assert seg.signals.length_pressure == pytest.approx(0.45)
    assert seg.signals.turn_pressure == pytest.approx(0.15)
    assert seg.signals.score == pytest.approx(score, abs=1e-4)
    assert seg.signals.p_cut == pytest.approx(sigmoid(-1.10 + score), abs=1e-4)
    assert seg.signals.p_cut >= 0.5
    assert [x.exchange_id for x in seg.exchanges] == ["x0", "x1", "x2"]
    assert seg.tokens == 300
    assert seg.segment_id == "ns/s1/0" and seg.index == 0
    # the new segment starts with the cutting exchange
    assert open_ids(r.state) == ["x3"]
    assert r.state.tokens == 10
    assert r.state.vector_sum == pytest.approx([0.6, 0.8, 0, 0, 0, 0, 0, 0], abs=1e-6)


def test_orthogonal_embedding_cuts_with_semantic_boundary() -> None:
    r = Runner(make_policy())
    _three_e0(r, 100)  # 300 tokens
    # x = e1 orthogonal: s = 1; A = clip(0.80/0.14 = 5.71) = 2.5; z = 0
    # d = 1 - sqrt(3^2 + 1)/4 = 1 - 0.790569 = 0.209431 -> C = min(2.5, 3.49) = 2.5
    # L(300) = 0.45; N(3) = 0.15
    # score = 0.65*2.5 + 0.45*2.5 + 0.90*0.45 + 0.30*0.15 = 1.625 + 1.125 + 0.405 + 0.045 = 3.2
    # P = sigmoid(2.1) = 0.8909 >= 0.5
    d = r.step(E1, 10)
    assert d.action == "cut"
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.semantic_boundary
    assert seg.signals is not None and d.signals == seg.signals
    assert seg.signals.surprise == pytest.approx(1.0, abs=1e-6)
    assert seg.signals.absolute_surprise == pytest.approx(2.5)
    assert seg.signals.cohesion_drop == pytest.approx(1 - math.sqrt(10) / 4, abs=1e-5)
    assert seg.signals.cohesion_term == pytest.approx(2.5)
    assert seg.signals.score == pytest.approx(3.2, abs=1e-5)
    assert seg.signals.p_cut == pytest.approx(sigmoid(2.1), abs=1e-5)
    assert seg.signals.p_cut >= r.policy.p.delta
    assert [x.exchange_id for x in seg.exchanges] == ["x0", "x1", "x2"]
    assert (seg.first_turn_id, seg.last_turn_id) == ("D1:0", "D1:2")
    assert open_ids(r.state) == ["x3"]
    assert r.state.tokens == 10


def test_orthogonal_cut_even_on_a_short_segment() -> None:
    # S = {e0}, 10 tokens; x = e1: A = 2.5, C = min(2.5, (1 - sqrt2/2)/0.06 = 4.88) = 2.5
    # score = 1.625 + 1.125 + 0.90*-1.30 + 0.30*-0.85 = 1.325; P = sigmoid(0.225) = 0.556
    r = Runner(make_policy())
    r.step(E0, 10)
    d = r.step(E1, 10)
    assert d.action == "cut"
    assert d.signals is not None
    assert d.signals.score == pytest.approx(1.325, abs=1e-5)
    assert d.signals.p_cut == pytest.approx(sigmoid(0.225), abs=1e-5)
    [seg] = d.finalized
    assert [x.exchange_id for x in seg.exchanges] == ["x0"]


def test_higher_delta_suppresses_the_cut() -> None:
    # same as above, P = 0.556 < delta = 0.6: append
    r = Runner(make_policy(delta=0.6))
    r.step(E0, 10)
    d = r.step(E1, 10)
    assert d.action == "append" and d.finalized == []


# -- capacity / target / exchange limit ------------------------------------------------


def test_capacity_limit_when_next_exchange_would_pass_max_tokens() -> None:
    r = Runner(make_policy())
    r.step(E0, 500)  # 500 < 600: stays open
    # 500 + 401 = 901 > 900: finalize S before looking at the cut
    d = r.step(E0, 401)
    assert d.action == "capacity"
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.capacity_limit
    assert [x.exchange_id for x in seg.exchanges] == ["x0"]
    assert seg.tokens == 500
    # the new segment holds the 401-token exchange and is below target: still open
    assert open_ids(r.state) == ["x1"]
    assert r.state.tokens == 401


def test_capacity_takes_precedence_over_a_semantic_cut() -> None:
    r = Runner(make_policy())
    r.step(E0, 500)
    # x = e1: s = 1, A = 2.5, C = 2.5, L(500) = 0.45 + 1.45*200/300 = 1.416667, N(1) = -0.85
    # score = 1.625 + 1.125 + 1.275 - 0.255 = 3.77 -> P = sigmoid(2.67) = 0.935: would cut,
    # but 500 + 401 > 900 comes first in Algorithm 1
    d = r.step(E1, 401)
    assert d.signals is not None and d.signals.p_cut >= 0.5
    assert d.signals.score == pytest.approx(3.77, abs=1e-5)
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.capacity_limit
    assert open_ids(r.state) == ["x1"]


def test_exactly_at_max_tokens_appends_then_closes_on_target() -> None:
    r = Runner(make_policy())
    r.step(E0, 500)
    # 500 + 400 = 900 is not past the cap. Signals: s = 0, A = -1 -> 0, C = 0,
    # L(500) = 1.416667, N(1) = -0.85 -> score = 1.275 - 0.255 = 1.02
    # P = sigmoid(-0.08) = 0.48 < 0.5: append; 900 >= 600 -> target_length
    d = r.step(E0, 400)
    assert d.action == "append"
    assert d.signals is not None
    assert d.signals.score == pytest.approx(0.90 * (0.45 + 1.45 * 200 / 300) - 0.255, abs=1e-5)
    assert d.signals.p_cut == pytest.approx(sigmoid(-0.08), abs=1e-5)
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.target_length
    assert seg.tokens == 900
    assert not r.state.is_open


def test_target_length_after_append() -> None:
    r = Runner(make_policy())
    r.step(E0, 300)
    # s = 0 -> A = -1 -> max(-1, 0) = 0; C = 0; L(300) = 0.45; N(1) = -0.85
    # score = 0.405 - 0.255 = 0.15; P = sigmoid(-0.95) = 0.279: append -> 600 >= 600
    d = r.step(E0, 300)
    assert d.action == "append"
    assert d.signals is not None
    assert d.signals.score == pytest.approx(0.15, abs=1e-6)
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.target_length
    assert [x.exchange_id for x in seg.exchanges] == ["x0", "x1"]
    assert seg.tokens == 600
    assert seg.signals == d.signals
    assert not r.state.is_open and r.state.tokens == 0
    # the next exchange starts a fresh segment with the next index
    d = r.step(E0, 10)
    assert d.action == "start"
    r.flush()
    assert [s.segment_id for s in r.segments] == ["ns/s1/0", "ns/s1/1"]


def test_one_exchange_at_target_closes_on_start() -> None:
    r = Runner(make_policy())
    d = r.step(E0, 650)  # 650 >= 600, <= 900
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.target_length
    assert not r.state.is_open


def test_exchange_limit_after_ten_exchanges() -> None:
    r = Runner(make_policy())
    # ten identical 10-token exchanges: s = 0 each time, so the history is all zeros,
    # MAD = 0 and z = 0/1e-6 = 0; A = -1 -> max = 0; C = 0; L(<= 90) = -1.30;
    # N <= 1.0 -> score <= -1.17 + 0.30 = -0.87 -> P <= sigmoid(-1.97) = 0.12: always append
    for i in range(9):
        d = r.step(E0, 10)
        assert d.finalized == [], i
    d = r.step(E0, 10)
    assert d.action == "append"
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.exchange_limit
    assert len(seg.exchanges) == 10
    assert seg.tokens == 100
    assert not r.state.is_open


def test_exchange_limit_follows_params() -> None:
    r = Runner(make_policy(max_exchanges=3))
    r.step(E0)
    r.step(E0)
    d = r.step(E0)
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.exchange_limit and len(seg.exchanges) == 3


# -- replay ----------------------------------------------------------------------------


def test_replayed_seq_changes_nothing() -> None:
    p = make_policy()
    state = new_state()
    p.step(state, ex(0), E0, now=1.0)
    p.step(state, ex(1), E0, now=2.0)
    before = state.model_dump()
    for seq in (1, 0):  # equal to the last applied seq, then lower
        d = p.step(state, ex(seq), E1, now=99.0)
        assert d.action == "replay"
        assert d.finalized == [] and d.signals is None
        assert state.model_dump() == before
    # a replay of a large exchange does not cut or split either
    d = p.step(state, ex(1, 2000), E1, now=99.0)
    assert d.action == "replay" and state.model_dump() == before
    # the next seq is applied normally
    d = p.step(state, ex(2), E0, now=3.0)
    assert d.action == "append" and state.last_seq == 2


def test_replay_after_finalize_does_not_duplicate() -> None:
    p = make_policy()
    state = new_state()
    p.step(state, ex(0, 300), E0, now=0.0)
    d = p.step(state, ex(1, 300), E0, now=0.0)
    assert len(d.finalized) == 1
    before = state.model_dump()
    assert p.step(state, ex(1, 300), E0, now=0.0).finalized == []
    assert state.model_dump() == before


# -- flush -----------------------------------------------------------------------------


def test_flush_finalizes_open_segment() -> None:
    r = Runner(make_policy())
    date = datetime(2023, 5, 8, 13, 56)
    r.step(E0, 10, date=date)
    r.step(E0, 10)
    out = r.flush()
    [seg] = out
    assert seg.reason is FinalizeReason.session_flush
    assert seg.signals is None
    assert [x.exchange_id for x in seg.exchanges] == ["x0", "x1"]
    assert seg.session_date == date
    assert seg.segment_id == "ns/s1/0"
    assert not r.state.is_open
    assert r.policy.flush(r.state) == []  # nothing left to flush


def test_flush_on_empty_state_returns_nothing() -> None:
    p = make_policy()
    state = new_state()
    before = state.model_dump()
    assert p.flush(state) == []
    assert state.model_dump() == before


# -- oversized exchanges ---------------------------------------------------------------


def test_oversized_exchange_is_split_into_fragments() -> None:
    r = Runner(make_policy())
    # 400 sentences of 6 words: content 2400 words, rendered "Ann: ..." 2401 tokens > 900
    content = " ".join(f"Sentence {i} has some words here." for i in range(400))
    d = r.step(E0, content=content)
    assert d.action == "split"
    segs = d.finalized
    # budget = 900 - (2401 - 2400) - 8 = 891 words per piece -> 148 sentences (888 words),
    # i.e. pieces of 888, 888, 624 words, rendered 889, 889, 625 tokens; two never fit in 900
    assert len(segs) == 3
    assert [s.segment_id for s in segs] == ["ns/s1/0", "ns/s1/1", "ns/s1/2"]
    assert [s.index for s in segs] == [0, 1, 2]
    assert [s.tokens for s in segs] == [889, 889, 625]
    for n, s in enumerate(segs):
        assert s.reason is FinalizeReason.oversized_exchange
        assert s.tokens <= 900
        [frag] = s.exchanges
        assert frag.fragment == n
        assert frag.exchange_id == "x0" and frag.seq == 0
        assert sum(count(t.rendered()) for t in frag.turns) <= 900
        assert (s.first_turn_id, s.last_turn_id) == ("D1:0", "D1:0")
    # no word lost, none duplicated, order kept
    joined = " ".join(t.content for s in segs for t in s.exchanges[0].turns)
    assert joined.split() == content.split()
    # fragments break at sentence ends
    for s in segs[:-1]:
        assert s.exchanges[0].turns[-1].content.endswith(".")
    assert not r.state.is_open
    # the next exchange starts a new segment after the fragments
    r.step(E0, 10)
    r.flush()
    assert [s.segment_id for s in r.segments][-1] == "ns/s1/3"


def test_an_oversized_exchange_is_encoded_in_its_first_fragments_only() -> None:
    r = Runner(make_policy(max_fragments=2))
    content = " ".join(f"Sentence {i} has some words here." for i in range(400))  # 3 pieces
    d = r.step(E0, content=content)
    assert d.action == "split" and len(d.finalized) == 2 and d.left_out == 1
    assert [s.segment_id for s in d.finalized] == ["ns/s1/0", "ns/s1/1"]
    kept = " ".join(t.content for s in d.finalized for t in s.exchanges[0].turns)
    assert content.startswith(kept) and len(kept.split()) == 2 * 888
    r.step(E0, 10)
    r.flush()
    assert [s.segment_id for s in r.segments][-1] == "ns/s1/2"  # the numbering goes on


def test_oversized_sentence_without_punctuation_splits_on_words() -> None:
    r = Runner(make_policy())
    content = " ".join(f"w{i}" for i in range(2000))  # one 2000-word "sentence"
    d = r.step(E0, content=content)
    segs = d.finalized
    assert len(segs) >= 3  # 2001 tokens cannot fit in two fragments of <= 900
    assert [s.segment_id for s in segs] == [f"ns/s1/{i}" for i in range(len(segs))]
    for s in segs:
        assert s.reason is FinalizeReason.oversized_exchange
        assert s.tokens <= 900
    joined = " ".join(t.content for s in segs for t in s.exchanges[0].turns)
    assert joined.split() == content.split()


def test_oversized_exchange_splits_at_turn_boundaries() -> None:
    p = make_policy()
    state = new_state()
    big = Exchange(
        namespace="ns",
        session_id="s1",
        seq=0,
        exchange_id="x0",
        turns=[
            Turn(role=Role.user, speaker="Ann", content=" ".join(["a"] * 500), turn_id="t0"),
            Turn(role=Role.assistant, speaker="Bob", content=" ".join(["b"] * 500), turn_id="t1"),
        ],
    )
    # 501 + 501 = 1002 > 900; each turn (501) fits alone, two together do not
    d = p.step(state, big, E0, now=0.0)
    segs = d.finalized
    assert [s.segment_id for s in segs] == ["ns/s1/0", "ns/s1/1"]
    assert [s.tokens for s in segs] == [501, 501]
    assert [s.exchanges[0].turn_ids for s in segs] == [["t0"], ["t1"]]
    assert [(s.first_turn_id, s.last_turn_id) for s in segs] == [("t0", "t0"), ("t1", "t1")]
    assert all(s.reason is FinalizeReason.oversized_exchange for s in segs)


def test_oversized_exchange_closes_the_open_segment_first() -> None:
    r = Runner(make_policy())
    r.step(E0, 10)
    r.step(E0, 10)
    d = r.step(E1, 1200)
    reasons = [s.reason for s in d.finalized]
    assert reasons[0] is FinalizeReason.capacity_limit
    assert [x.exchange_id for x in d.finalized[0].exchanges] == ["x0", "x1"]
    assert reasons[1:] and all(x is FinalizeReason.oversized_exchange for x in reasons[1:])
    assert [s.segment_id for s in d.finalized] == [f"ns/s1/{i}" for i in range(len(d.finalized))]
    assert all(s.tokens <= 900 for s in d.finalized)


# -- ablation modes --------------------------------------------------------------------


def test_fixed_window_never_cuts_on_semantics() -> None:
    r = Runner(make_policy(mode=SegmentMode.fixed_window))
    # every exchange orthogonal to the previous one (a semantic cut every time in semantic
    # mode); ten 10-token exchanges -> one exchange_limit segment
    for i in range(10):
        d = r.step(basis(i % DIM), 10)
        assert d.signals is None
        assert d.action in ("start", "append")
    assert [s.reason for s in r.segments] == [FinalizeReason.exchange_limit]
    assert len(r.segments[0].exchanges) == 10
    assert r.state.history == []
    assert r.segments[0].mode is SegmentMode.fixed_window


def test_fixed_window_target_and_capacity() -> None:
    r = Runner(make_policy(mode=SegmentMode.fixed_window))
    for i in range(6):  # 6 x 100 = 600 -> target_length on the 6th
        r.step(basis(i % DIM), 100)
    assert [s.reason for s in r.segments] == [FinalizeReason.target_length]
    assert len(r.segments[0].exchanges) == 6
    r.step(E0, 500)
    d = r.step(E1, 401)  # 901 > 900
    assert [s.reason for s in d.finalized] == [FinalizeReason.capacity_limit]
    assert r.flush()[0].reason is FinalizeReason.session_flush
    assert [s.reason for s in r.segments] == [
        FinalizeReason.target_length,
        FinalizeReason.capacity_limit,
        FinalizeReason.session_flush,
    ]


def test_eager_gives_one_segment_per_exchange() -> None:
    r = Runner(make_policy(mode=SegmentMode.eager))
    embs = [E0, E0, E1, E0]
    for i, e in enumerate(embs):
        d = r.step(e, 10)
        [seg] = d.finalized
        assert seg.reason is FinalizeReason.per_exchange
        assert seg.mode is SegmentMode.eager
        assert [x.exchange_id for x in seg.exchanges] == [f"x{i}"]
        assert not r.state.is_open
    assert [s.segment_id for s in r.segments] == [f"ns/s1/{i}" for i in range(4)]
    assert r.flush() == []


# -- surprise history ------------------------------------------------------------------


def test_history_is_not_reset_at_boundaries_and_is_capped() -> None:
    r = Runner(make_policy(history_size=4))
    r.step(E0)  # start: no signal
    r.step(E0)  # s = 0, append (P = 0.074)
    assert r.state.history == pytest.approx([0.0], abs=1e-6)
    # e1 vs S = {e0, e0}: s = 1, A = 2.5, d = 1 - sqrt(5)/3 = 0.2546 -> C = 2.5,
    # L(20) = -1.30, N(2) = -0.15 -> score = 1.625 + 1.125 - 1.17 - 0.045 = 1.535,
    # P = sigmoid(0.435) = 0.607: cut
    d = r.step(E1)
    assert d.action == "cut"
    assert r.state.history == pytest.approx([0.0, 1.0], abs=1e-6)  # kept across the cut
    # 0.8 e1 + 0.6 e2 vs S = {e1}: s = 1 - 0.8 = 0.2 -> A = 0; z = 0 (2 values)
    # d = 1 - sqrt(1.8^2 + 0.6^2)/2 = 1 - 0.948683 = 0.051317 -> C = 0.855284
    # score = 0.45*0.855284 - 1.17 - 0.255 = -1.040122 -> P = 0.107: append
    d = r.step(mix(1, 0.8, 2, 0.6))
    assert d.action == "append"
    assert r.state.history == pytest.approx([0.0, 1.0, 0.2], abs=1e-5)
    d = r.step(E3)  # orthogonal to everything: s = 1
    assert d.action == "cut"
    assert r.state.history == pytest.approx([0.0, 1.0, 0.2, 1.0], abs=1e-5)
    d = r.step(E3)  # s = 0; history_size 4 drops the oldest value
    assert r.state.history == pytest.approx([1.0, 0.2, 1.0, 0.0], abs=1e-5)


def test_history_default_cap_is_64() -> None:
    r = Runner(make_policy())
    for i in range(80):
        r.step(basis(i % 2), 10)
    assert len(r.state.history) == 64


def test_robust_surprise_uses_history_once_it_has_five_values() -> None:
    r = Runner(make_policy())
    # six identical exchanges -> five zeros in the history (the first gives no signal)
    for _ in range(6):
        r.step(E0, 10)
    assert r.state.history == pytest.approx([0.0] * 5, abs=1e-6)
    # e1 against S = {e0 x6}: s = 1; median 0, MAD 0 -> z = 1/1e-6 -> clipped at 4
    d = r.step(E1, 10)
    assert d.signals is not None
    assert d.signals.robust_surprise == 4.0


# -- whole-session invariants ----------------------------------------------------------


def _check_partition(segments: list[Segment], exchanges: list[str]) -> None:
    assert [s.segment_id for s in segments] == [f"ns/s1/{i}" for i in range(len(segments))]
    assert [s.index for s in segments] == list(range(len(segments)))
    seen = [x.exchange_id for s in segments for x in s.exchanges]
    assert seen == exchanges  # each exchange exactly once, in order
    for s in segments:
        ids = [tid for x in s.exchanges for tid in x.turn_ids]
        assert s.first_turn_id == ids[0] and s.last_turn_id == ids[-1]
        assert s.turn_ids == ids
        assert s.tokens == sum(x.tokens for x in s.exchanges)
        assert s.tokens <= 900
        assert len(s.exchanges) <= 10
        assert all(x.fragment is None for x in s.exchanges)


@pytest.mark.parametrize("mode", list(SegmentMode))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_exchange_in_exactly_one_segment(mode: SegmentMode, seed: int) -> None:
    rng = np.random.default_rng(seed)
    r = Runner(make_policy(mode=mode))
    topic = 0
    names = []
    for _ in range(120):
        if rng.random() < 0.2:
            topic = int(rng.integers(0, DIM))
        e = basis(topic) + 0.3 * rng.normal(size=DIM).astype(np.float32)
        names.append(f"x{r.seq}")
        r.step(e, int(rng.integers(2, 400)))
    r.flush()
    _check_partition(r.segments, names)
    if mode is SegmentMode.semantic:
        assert FinalizeReason.semantic_boundary in {s.reason for s in r.segments}
    else:
        assert FinalizeReason.semantic_boundary not in {s.reason for s in r.segments}


def test_policy_is_deterministic() -> None:
    def run() -> list[dict]:  # type: ignore[type-arg]
        rng = np.random.default_rng(5)
        r = Runner(make_policy())
        for _ in range(60):
            r.step(rng.normal(size=DIM).astype(np.float32), int(rng.integers(2, 200)))
        r.flush()
        return [s.model_dump() for s in r.segments]

    assert run() == run()


def test_state_round_trips_through_json() -> None:
    # the service stores the state as one JSON value between steps
    p = make_policy()
    rng = np.random.default_rng(9)
    a, b = new_state(), new_state()
    out_a, out_b = [], []
    for i in range(40):
        e = rng.normal(size=DIM).astype(np.float32)
        n = int(rng.integers(2, 200))
        out_a += p.step(a, ex(i, n), e, now=0.0).finalized
        b = SessionState.model_validate_json(b.model_dump_json())
        out_b += p.step(b, ex(i, n), e, now=0.0).finalized
    assert [s.model_dump() for s in out_a] == [s.model_dump() for s in out_b]


# -- known product bugs ----------------------------------------------------------------


def test_eager_with_an_exchange_at_target_length() -> None:
    r = Runner(make_policy(mode=SegmentMode.eager))
    r.step(E0, 10)
    d = r.step(E0, 650)  # 600 <= 650 <= 900: not oversized, but reaches the target
    [seg] = d.finalized
    assert seg.reason is FinalizeReason.per_exchange
    assert [x.exchange_id for x in seg.exchanges] == ["x1"]
    assert [s.segment_id for s in r.segments] == ["ns/s1/0", "ns/s1/1"]


def test_oversized_turn_with_a_long_caption_stays_under_the_cap() -> None:
    p = make_policy()
    state = new_state()
    big = Exchange(
        namespace="ns",
        session_id="s1",
        seq=0,
        exchange_id="x0",
        turns=[
            Turn(
                role=Role.user,
                speaker="Ann",
                content=" ".join(["a"] * 100),
                image_caption=" ".join(["c"] * 950),
                turn_id="t0",
            )
        ],
    )
    d = p.step(state, big, E0, now=0.0)
    assert len(d.finalized) == 2 and all(s.tokens <= 900 for s in d.finalized)
    pieces = [t.content for s in d.finalized for x in s.exchanges for t in x.turns]
    turn = big.turns[0]
    assert " ".join(pieces) == turn_text(turn.content, turn.image_caption)  # all kept, once


def test_eager_keeps_a_segment_left_open_under_another_mode() -> None:
    # the mode changed between deploys: the session's stored state still has an open segment
    r = Runner(make_policy())
    r.step(E0)
    r.step(E0)
    assert open_ids(r.state) == ["x0", "x1"] and not r.segments
    r.policy = make_policy(mode=SegmentMode.eager)
    d = r.step(E1)
    assert [(s.reason, [x.exchange_id for x in s.exchanges]) for s in d.finalized] == [
        (FinalizeReason.session_flush, ["x0", "x1"]),
        (FinalizeReason.per_exchange, ["x2"]),
    ]
    assert not r.state.is_open


# -- turns that are not memory ------------------------------------------------------------


def tool(seq: int, words: int = 10) -> Exchange:
    """An agent's tool output (`memory=False`) of `words` words."""
    content = " ".join(["{json}"] * words)
    turn = Turn(role=Role.assistant, content=content, turn_id=f"D1:{seq}", memory=False)
    return Exchange(namespace="ns", session_id="s1", seq=seq, exchange_id=f"x{seq}", turns=[turn])


def test_a_tool_output_is_in_no_segment_and_has_no_say_in_where_one_ends() -> None:
    r = Runner(make_policy())
    _three_e0(r, 100)
    before = r.state.model_copy(deep=True)
    # orthogonal and longer than the cap: as memory it would split, or cut (see above)
    d = r.policy.step(r.state, tool(3, words=2_000), E1, now=3.0)
    assert d.action == "aside" and d.finalized == [] and d.signals is None
    assert r.state.last_seq == 3  # applied: a replay of it changes nothing
    assert r.state.model_dump(exclude={"last_seq", "updated_at"}) == before.model_dump(
        exclude={"last_seq", "updated_at"}
    )
    assert r.policy.step(r.state, tool(3), E1, now=4.0).action == "replay"
    r.seq = 4
    d = r.step(E0, 10)  # the conversation goes on: the same subject, no cut
    assert d.action == "append"
    assert d.signals is not None and d.signals.surprise == pytest.approx(0.0, abs=1e-6)
    [seg] = r.flush()
    assert [x.exchange_id for x in seg.exchanges] == ["x0", "x1", "x2", "x4"]
    assert seg.tokens == 310


@pytest.mark.parametrize("mode", [SegmentMode.semantic, SegmentMode.eager])
def test_tool_outputs_alone_open_no_segment(mode: SegmentMode) -> None:
    r = Runner(make_policy(mode=mode))
    for seq in range(12):  # past the exchange cap: still nothing to encode
        assert r.policy.step(r.state, tool(seq), E1, now=float(seq)).action == "aside"
    assert not r.state.is_open and r.flush() == []
    r.seq = 12
    assert r.step(E0, 10).action == "start"


def test_a_segment_holds_an_exchanges_memory_turns_only() -> None:
    """A run's message, the tool output it called for and the reply, sent as one exchange:
    the output (longer than the cap) is neither counted, split nor carried to the encoder."""
    asked = Turn(role=Role.user, speaker="Ann", content="w w w", turn_id="D1:0")
    output = Turn(role=Role.assistant, content="{json} " * 2_000, turn_id="D1:1", memory=False)
    reply = Turn(role=Role.assistant, speaker="Bot", content="w w w w", turn_id="D1:2")
    run = Exchange(
        namespace="ns", session_id="s1", seq=0, exchange_id="x0", turns=[asked, output, reply]
    )
    r = Runner(make_policy())
    d = r.policy.step(r.state, run, E0, now=0.0)
    assert d.action == "start" and r.state.tokens == 9  # "Ann: w w w" and "Bot: w w w w"
    [seg] = r.flush()
    [held] = seg.exchanges
    assert (held.turn_ids, held.turns) == (["D1:0", "D1:2"], [asked, reply])
    assert (seg.first_turn_id, seg.last_turn_id, seg.tokens) == ("D1:0", "D1:2", 9)


@pytest.mark.parametrize("tokens", [10, 5_000], ids=["a-cut", "an-oversized-exchange"])
def test_a_segment_is_dated_by_its_own_exchanges_not_the_one_that_closes_it(tokens: int) -> None:
    """The exchange that closes a segment starts the next: its date is that one's, so what
    "today" means in the closed segment is read against the day it was said."""
    may1, may20 = datetime(2025, 5, 1, 9), datetime(2025, 5, 20, 18)
    r = Runner(make_policy())
    for _ in range(3):
        r.step(E0, 100, date=may1)
    d = r.step(E1, tokens, date=may20)  # another subject, weeks later
    assert d.action in ("day", "split")
    assert d.finalized[0].session_date == may1
    assert all(s.session_date == may20 for s in d.finalized[1:])
    assert r.state.session_date == may20
    r.step(E1, 10)  # an undated exchange keeps the session's last date
    assert [s.session_date for s in r.flush()] in ([may20], [])


def test_an_exchange_of_another_day_closes_the_segment_whatever_its_subject() -> None:
    """The same subject the next morning is a new segment, dated by its own day; hours apart
    on one day, or a day not known, is no reason to close one."""
    evening, late, morning = (
        datetime(2025, 5, 1, 18),
        datetime(2025, 5, 1, 23),
        datetime(2025, 5, 2, 8),
    )
    r = Runner(make_policy())
    assert r.step(E0, date=evening).action == "start"
    assert r.step(E0, date=late).action == "append"
    assert r.step(E0).action == "append"  # undated: the open segment's day holds
    d = r.step(E0, date=morning)
    assert d.action == "day"
    [closed] = d.finalized
    assert (closed.reason, closed.session_date, len(closed.exchanges)) == (
        FinalizeReason.day_change,
        late,
        3,
    )
    [held] = r.flush()
    assert (held.session_date, len(held.exchanges)) == (morning, 1)
