"""The segmenter stage: exchanges in, raw turns and finalized segments out.

Broker-free: it takes validated messages and hands what it produces to a `Publisher`.
Order of operations (this is what makes it at-least-once without duplicates):
1. embed the whole batch at once;
2. per message: load state, fence on `seq`, decide, and write the new state together
   with its outgoing messages (outbox) in one atomic Redis script;
3. publish every touched session's outbox and wait for the broker's acks;
4. trim the published entries; only then may the caller commit the input offsets.
A crash anywhere replays input that the fence turns into no-ops, while step 3 of the
replay publishes whatever an earlier run left in the outbox.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import structlog

from schemas import (
    ControlKind,
    Exchange,
    ExchangeTopicMessage,
    RawTurn,
    Segment,
    SessionControl,
    session_key,
)
from schemas import topics as t
from schemas.errors import LycheeError
from workers.embedding import Embedder, Matrix
from workers.ports import OutMessage, Publisher
from workers.segmenter.policy import Decision, SegmentPolicy, SessionState
from workers.segmenter.state_store import SessionStore

log = structlog.get_logger("lychee.segmenter")


class StateConflict(LycheeError, RuntimeError):
    """Another writer kept changing a session's state; the batch is retried."""


@dataclass
class BatchResult:
    decisions: list[Decision] = field(default_factory=list)
    segments: int = 0
    turns: int = 0
    replays: int = 0


class SegmenterService:
    def __init__(
        self,
        store: SessionStore,
        embedder: Embedder,
        policy: SegmentPolicy,
        publisher: Publisher,
        *,
        ended_ttl_s: int = 7 * 24 * 3600,
        clock: Callable[[], float] = time.time,
        max_conflicts: int = 8,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.publisher = publisher
        self.ended_ttl_s = ended_ttl_s
        self.clock = clock
        self.max_conflicts = max_conflicts

    async def handle(self, messages: Sequence[ExchangeTopicMessage]) -> BatchResult:
        result = BatchResult()
        exchanges = [m for m in messages if isinstance(m, Exchange)]
        vectors = iter(await self._embed(exchanges))  # in the order of `exchanges`
        touched: dict[str, None] = {}
        for msg in messages:
            touched[msg.key] = None
            if isinstance(msg, Exchange):
                decision = await self._apply_exchange(msg, *next(vectors))
            else:
                decision = await self._apply_control(msg)
            result.decisions.append(decision)
            result.segments += len(decision.finalized)
            result.replays += decision.action == "replay"
            if decision.action != "replay" and isinstance(msg, Exchange):
                result.turns += len(msg.turns)
        await self.drain(list(touched))
        return result

    async def drain(self, keys: Sequence[str]) -> int:
        """Publish every pending outbox entry of these sessions, then trim them."""
        pending = [(k, await self.store.pending(k)) for k in keys]
        flat = [m for _, msgs in pending for m in msgs]
        if not flat:
            return 0
        await self.publisher.publish(flat)
        for k, msgs in pending:
            await self.store.trim(k, len(msgs))
        return len(flat)

    async def flush_idle(self, idle_timeout_s: float) -> int:
        """Finalize open segments of sessions idle for longer than the timeout."""
        keys = await self.store.idle_sessions(self.clock() - idle_timeout_s)
        closed = 0
        for key in keys:
            namespace, _, session_id = key.partition("/")
            ctl = SessionControl(kind=ControlKind.flush, namespace=namespace, session_id=session_id)
            decision = await self._apply_control(ctl, idle_before=self.clock() - idle_timeout_s)
            closed += len(decision.finalized)
        await self.drain(keys)
        return closed

    # -- internals ----------------------------------------------------------------------

    async def _embed(self, exchanges: Sequence[Exchange]) -> list[tuple[Matrix, list[Matrix]]]:
        """One embedding call for the batch: per exchange, in order, its vector and one vector
        per turn (a single-turn exchange's turn shares the exchange's). Matched by position:
        exchange ids repeat across sessions and namespaces."""
        texts = [ex.rendered() for ex in exchanges]
        texts += [t.rendered() for ex in exchanges if len(ex.turns) > 1 for t in ex.turns]
        if not texts:
            return []
        matrix = await asyncio.to_thread(self.embedder.embed, texts)
        out, j = [], len(exchanges)
        for i, ex in enumerate(exchanges):
            if len(ex.turns) > 1:
                out.append((matrix[i], list(matrix[j : j + len(ex.turns)])))
                j += len(ex.turns)
            else:
                out.append((matrix[i], [matrix[i]]))
        return out

    async def _apply_exchange(self, ex: Exchange, vec: Matrix, turn_vecs: list[Matrix]) -> Decision:
        for _ in range(self.max_conflicts):
            version, state = await self.store.load(ex.key)
            state = state or SessionState(namespace=ex.namespace, session_id=ex.session_id)
            decision = self.policy.step(state, ex, vec, self.clock())
            if decision.action == "replay":
                log.info("exchange.replayed", key=ex.key, seq=ex.seq, last_seq=state.last_seq)
                return decision
            outbox = self._turn_messages(ex, turn_vecs) + _segment_messages(decision.finalized)
            if await self.store.commit(ex.key, version, state, outbox):
                return decision
        raise StateConflict(f"session {ex.key} changed under us {self.max_conflicts} times")

    async def _apply_control(
        self, ctl: SessionControl, idle_before: float | None = None
    ) -> Decision:
        for _ in range(self.max_conflicts):
            version, state = await self.store.load(ctl.key)
            if state is None:
                return Decision("noop", None, [])
            if ctl.after_seq is not None and ctl.after_seq < state.last_seq:
                return Decision("replay", None, [])  # later exchanges were applied already
            if state.ended and not state.is_open:
                return Decision("replay", None, [])  # ended, nothing arrived since
            if idle_before is not None and (not state.is_open or state.updated_at > idle_before):
                return Decision("noop", None, [])  # activity since the scan: not idle any more
            finalized = self.policy.flush(state)
            ttl = 0
            if ctl.kind is ControlKind.end_session:
                state.ended = True
                state.history, state.last_vector = [], None
                ttl = self.ended_ttl_s  # keep seq and segment counter for fencing a while
            elif not finalized:
                return Decision("noop", None, [])
            if await self.store.commit(ctl.key, version, state, _segment_messages(finalized), ttl):
                if finalized:
                    log.info(
                        "segment.flushed",
                        key=ctl.key,
                        kind=ctl.kind.value,
                        idle=idle_before is not None,
                    )
                return Decision("flush", None, finalized)
        raise StateConflict(f"session {ctl.key} changed under us {self.max_conflicts} times")

    def _turn_messages(self, ex: Exchange, turn_vecs: list[Matrix]) -> list[OutMessage]:
        out = []
        for i, (tid, turn, tvec) in enumerate(zip(ex.turn_ids(), ex.turns, turn_vecs, strict=True)):
            raw = RawTurn(
                namespace=ex.namespace,
                session_id=ex.session_id,
                turn_id=tid,
                exchange_id=ex.exchange_id,
                seq=ex.seq,
                index=i,
                role=turn.role,
                speaker=turn.speaker,
                text=turn.content,
                image_caption=turn.image_caption,
                session_date=ex.session_date,
                created_at=turn.created_at,
                embedding=np.asarray(tvec, dtype=np.float32).tolist(),
                embedding_model=self.embedder.model_name,
            )
            out.append(OutMessage(t.TURNS, ex.key, raw.model_dump_json().encode()))
        return out


def _segment_messages(segments: Sequence[Segment]) -> list[OutMessage]:
    return [
        OutMessage(t.SEGMENTS, session_key(s.namespace, s.session_id), s.model_dump_json().encode())
        for s in segments
    ]
