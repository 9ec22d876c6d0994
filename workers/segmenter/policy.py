"""The decision order of Algorithm 1 as a pure state machine over one session.

`SegmentPolicy.step` takes the session state, one exchange and its embedding, mutates
the state and returns the segments it finalized. No I/O: the service around it loads
and stores the state atomically, so the same inputs always give the same segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from pydantic import BaseModel, Field

from schemas import (
    BoundarySignals,
    Exchange,
    FinalizeReason,
    LogPosition,
    Segment,
    SegmentExchange,
    SegmentMode,
    Turn,
    segment_id,
)
from schemas.exchange import turn_text
from workers.segmenter import signals as sig
from workers.segmenter.params import SegmenterParams, SurpriseCalibration
from workers.segmenter.pieces import TokenCounter, split_text


@dataclass(frozen=True)
class Position:
    """Where an input message sits in its source log (a Kafka partition and offset)."""

    partition: int
    offset: int

    def log(self) -> LogPosition:
        return LogPosition(partition=self.partition, offset=self.offset)


class SessionState(BaseModel):
    """Everything the segmenter keeps per session (stored as one JSON value in Redis)."""

    namespace: str
    session_id: str
    last_seq: int = -1
    next_index: int = 0
    exchanges: list[SegmentExchange] = Field(default_factory=list)
    tokens: int = 0
    vector_sum: list[float] | None = None
    last_vector: list[float] | None = None
    history: list[float] = Field(default_factory=list)
    session_date: datetime | None = None
    updated_at: float = 0.0
    ended: bool = False
    # Position of the last input message applied to this session (see the service):
    # every message of a session comes from one partition, in order, so a message at or
    # before it is a redelivery, whatever its kind and fields.
    partition: int = -1
    last_offset: int = -1
    # Offset of the first message this state applied, which a forget fence compares
    # (workers.forget): a state begun before a fence is cut there (the service) before use.
    first_offset: int = -1

    def seen(self, position: Position | None) -> bool:
        """Whether the message at `position` was applied already (a redelivery)."""
        return (
            position is not None
            and position.partition == self.partition
            and position.offset <= self.last_offset
        )

    def mark(self, position: Position | None) -> None:
        if position is not None:
            if self.first_offset < 0:
                self.first_offset = position.offset
            self.partition, self.last_offset = position.partition, position.offset

    @property
    def is_open(self) -> bool:
        return bool(self.exchanges)


@dataclass(frozen=True)
class Decision:
    """What happened to one exchange, for logs and tests."""

    action: str  # start | append | aside | cut | day | capacity | split | replay | redelivery
    signals: BoundarySignals | None
    finalized: list[Segment]
    left_out: int = 0  # an oversized exchange's fragments past `max_fragments`: not encoded


class SegmentPolicy:
    def __init__(
        self, params: SegmenterParams, calibration: SurpriseCalibration, count: TokenCounter
    ) -> None:
        self.p = params
        self.cal = calibration
        self.count = count

    # -- public -------------------------------------------------------------------------

    def step(
        self,
        state: SessionState,
        ex: Exchange,
        emb: sig.Vector,
        now: float,
        position: Position | None = None,
        trace: str | None = None,
    ) -> Decision:
        """Apply one exchange read at `position` (`trace`: its traceparent, kept with it for
        the segment's span links); a `seq` at or below the last applied one changes
        nothing."""
        if ex.seq <= state.last_seq:
            return Decision("replay", None, [])
        state.last_seq = ex.seq
        state.updated_at = now
        state.ended = False
        # an agent's tool calls and their outputs are kept as raw turns and never encoded:
        # they are in no segment and have no say in where one ends (their JSON is no change
        # of subject, nor length), and an exchange of them only is set aside whole
        said = [
            (tid, turn) for tid, turn in zip(ex.turn_ids(), ex.turns, strict=True) if turn.memory
        ]
        if not said:
            return Decision("aside", None, [])
        e = _unit(emb)
        item = SegmentExchange(
            exchange_id=ex.exchange_id,
            seq=ex.seq,
            turn_ids=[tid for tid, _ in said],
            turns=[turn for _, turn in said],
            tokens=self.count(ex.remembered()),
            source=position.log() if position is not None else None,
            trace=trace,
        )
        # the exchange's date is its segment's from here on, not the one it closes: a
        # segment is dated by what it holds ("today" in it is read against that date)
        date = ex.session_date
        if item.tokens > self.p.max_tokens:
            return self._split_oversized(state, item, e, date)
        if self.p.mode is SegmentMode.eager:
            out = self.flush(state)  # a segment left open under another mode is kept
            self._append(state, item, e, date)
            out += self._finalize(state, FinalizeReason.per_exchange, None)
            return Decision("start", None, out)
        if not state.is_open:
            return Decision("start", None, self._start(state, item, e, date))
        if _another_day(state.session_date, date):
            # a segment is dated by one day: what was said the day before keeps its own
            out = self._finalize(state, FinalizeReason.day_change, None)
            return Decision("day", None, out + self._start(state, item, e, date))

        signals = self._signals(state, e) if self.p.mode is SegmentMode.semantic else None
        if signals is not None:
            state.history = (state.history + [signals.surprise])[-self.p.history_size :]

        if state.tokens + item.tokens > self.p.max_tokens:
            out = self._finalize(state, FinalizeReason.capacity_limit, signals)
            return Decision("capacity", signals, out + self._start(state, item, e, date))
        if signals is not None and signals.p_cut >= self.p.delta:
            out = self._finalize(state, FinalizeReason.semantic_boundary, signals)
            return Decision("cut", signals, out + self._start(state, item, e, date))
        self._append(state, item, e, date)
        return Decision("append", signals, self._close_if_full(state, signals))

    def flush(self, state: SessionState) -> list[Segment]:
        """`flush`, `end_session` and the idle timeout: finalize whatever is open."""
        if not state.is_open:
            return []
        return self._finalize(state, FinalizeReason.session_flush, None)

    # -- internals ----------------------------------------------------------------------

    def _signals(self, state: SessionState, e: sig.Vector) -> BoundarySignals:
        assert state.vector_sum is not None and state.last_vector is not None
        total = np.asarray(state.vector_sum, dtype=np.float32)
        last = np.asarray(state.last_vector, dtype=np.float32)
        n = len(state.exchanges)
        s = sig.surprise(e, (total / n).astype(np.float32), last)
        z = sig.robust_surprise(s, state.history, self.p)
        a = sig.absolute_surprise(s, self.cal)
        d = sig.cohesion_drop(total, n, e)
        c = sig.cohesion_term(d, self.p)
        length = sig.length_pressure(state.tokens, self.p)
        turns = sig.turn_pressure(n)
        score = sig.combined_score(a, z, c, length, turns, self.p)
        return BoundarySignals(
            surprise=s,
            robust_surprise=z,
            absolute_surprise=a,
            cohesion_drop=d,
            cohesion_term=c,
            length_pressure=length,
            turn_pressure=turns,
            score=score,
            p_cut=sig.p_cut(score, self.p),
        )

    def _start(
        self, state: SessionState, item: SegmentExchange, e: sig.Vector, date: datetime | None
    ) -> list[Segment]:
        """A new segment; only ever called with none open (`_finalize` resets the state)."""
        self._append(state, item, e, date)
        return self._close_if_full(state, None)

    def _append(
        self, state: SessionState, item: SegmentExchange, e: sig.Vector, date: datetime | None
    ) -> None:
        if date is not None:
            state.session_date = date
        state.exchanges.append(item)
        state.tokens += item.tokens
        total = e if state.vector_sum is None else np.asarray(state.vector_sum) + e
        state.vector_sum = [float(x) for x in total]
        state.last_vector = [float(x) for x in e]

    def _close_if_full(self, state: SessionState, signals: BoundarySignals | None) -> list[Segment]:
        if state.tokens >= self.p.target_tokens:
            return self._finalize(state, FinalizeReason.target_length, signals)
        if len(state.exchanges) >= self.p.max_exchanges:
            return self._finalize(state, FinalizeReason.exchange_limit, signals)
        return []

    def _finalize(
        self, state: SessionState, reason: FinalizeReason, signals: BoundarySignals | None
    ) -> list[Segment]:
        items = state.exchanges
        turn_ids = [t for it in items for t in it.turn_ids]
        seg = Segment(
            segment_id=segment_id(state.namespace, state.session_id, state.next_index),
            namespace=state.namespace,
            session_id=state.session_id,
            index=state.next_index,
            mode=self.p.mode,
            reason=reason,
            exchanges=items,
            first_turn_id=turn_ids[0],
            last_turn_id=turn_ids[-1],
            tokens=state.tokens,
            session_date=state.session_date,
            signals=signals,
        )
        state.next_index += 1
        state.exchanges = []
        state.tokens = 0
        state.vector_sum = None
        return [seg]

    def _split_oversized(
        self, state: SessionState, item: SegmentExchange, e: sig.Vector, date: datetime | None
    ) -> Decision:
        out = self._finalize(state, FinalizeReason.capacity_limit, None) if state.is_open else []
        if date is not None:
            state.session_date = date
        pieces: list[tuple[str, Turn]] = []
        for tid, turn in zip(item.turn_ids, item.turns, strict=True):
            if self.count(turn.rendered()) <= self.p.max_tokens:
                pieces.append((tid, turn))
                continue
            # the caption is text like any other here: split with the content, not repeated
            text = turn_text(turn.content, turn.image_caption)
            bare = turn.model_copy(update={"content": text, "image_caption": None})
            for piece in self._split_text(bare.rendered(), text):
                pieces.append((tid, bare.model_copy(update={"content": piece})))
        groups = self._pack(pieces)
        kept = groups[: self.p.max_fragments]
        for n, group in enumerate(kept):
            frag = SegmentExchange(
                exchange_id=item.exchange_id,
                seq=item.seq,
                turn_ids=[tid for tid, _ in group],  # aligned with turns
                turns=[t for _, t in group],
                tokens=sum(self.count(t.rendered()) for _, t in group),
                fragment=n,
                source=item.source,
                trace=item.trace,
            )
            state.exchanges = [frag]
            state.tokens = frag.tokens
            out += self._finalize(state, FinalizeReason.oversized_exchange, None)
        state.last_vector = [float(x) for x in e]
        return Decision("split", None, out, left_out=len(groups) - len(kept))

    def _split_text(self, rendered: str, content: str) -> list[str]:
        """A turn's content in pieces under the cap (`workers.segmenter.pieces`)."""
        if self.count(rendered) <= self.p.max_tokens:
            return [content]
        budget = max(1, self.p.max_tokens - (self.count(rendered) - self.count(content)) - 8)
        return split_text(content, budget, self.count)

    def _pack(self, pieces: Sequence[tuple[str, Turn]]) -> list[list[tuple[str, Turn]]]:
        """Greedy packing of turn pieces into fragments of at most `max_tokens`."""
        groups: list[list[tuple[str, Turn]]] = [[]]
        used = 0
        for tid, turn in pieces:
            cost = self.count(turn.rendered())
            if groups[-1] and used + cost > self.p.max_tokens:
                groups.append([])
                used = 0
            groups[-1].append((tid, turn))
            used += cost
        return groups


def _unit(v: sig.Vector) -> sig.Vector:
    arr = np.asarray(v, dtype=np.float32)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr


def _another_day(held: datetime | None, date: datetime | None) -> bool:
    """Whether an exchange is dated on another calendar day than the open segment (a day
    unknown on either side is none)."""
    return held is not None and date is not None and held.date() != date.date()
