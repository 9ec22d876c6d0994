"""The segmenter stage: exchanges in, raw turns and finalized segments out.

Broker-free: it takes validated messages and hands what it produces to a `Publisher`.
Order of operations (this is what makes it at-least-once without duplicates):
1. embed the whole batch at once;
2. per message: load state, fence it, decide, and write the new state together with
   its outgoing messages (outbox) and the message's position in one atomic Redis script;
3. publish every touched session's outbox and wait for the broker's acks;
4. delete exactly the published entries; only then may the caller commit the offsets.
A crash anywhere replays input that the fence turns into no-ops, while step 3 of the
replay publishes whatever an earlier run left in the outbox. An outbox that no input
will ever touch again (the idle timer's segment, a publish that failed after its
commit) is found through the store's `pending` set by `drain_pending`, which the stage
runs at start-up and on its timer.

Fencing: every message of a session arrives from one partition, in order, so a message
at or before the last applied position is a redelivery and changes nothing, whatever
its kind (a redelivered `flush` must not close what was opened after it). Exchanges are
also fenced by `seq`, which catches a producer sending the same exchange twice; such
replays are counted per session so that `lychee ingest --wait` can report them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from schemas import (
    ControlKind,
    Exchange,
    ExchangeTopicMessage,
    Segment,
    SessionControl,
    session_key,
)
from schemas import topics as t
from workers import telemetry
from workers.embedding import Embedder, Matrix
from workers.errors import Unprocessable
from workers.forget import (
    Source,
    exchange_sources,
    gateway_key,
    glob_escape,
    segment_lineage,
    source_of,
)
from workers.ports import OutMessage, Publisher
from workers.segmenter.errors import StateConflict
from workers.segmenter.policy import Decision, Position, SegmentPolicy, SessionState
from workers.segmenter.state_store import SessionStore
from workers.segmenter.vectors import embed_exchanges, raw_turns

log = structlog.get_logger("lychee.segmenter")


@dataclass
class BatchResult:
    decisions: list[Decision] = field(default_factory=list)
    segments: int = 0
    turns: int = 0
    replays: int = 0  # fenced by seq or after_seq: the producer sent something old
    redeliveries: int = 0  # fenced by position: the broker delivered a message again
    forgotten: int = 0  # produced before a forget of their namespace or session: dropped


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

    async def handle(
        self,
        messages: Sequence[ExchangeTopicMessage],
        positions: Sequence[Position | None] | None = None,
        headers: Sequence[telemetry.Headers | None] | None = None,
    ) -> BatchResult:
        """Apply a batch in order; `positions[i]` is where `messages[i]` was read from
        (None when unknown: then only `seq` and `after_seq` fence), `headers[i]` its
        headers (its trace context: what it produces continues that trace)."""
        where = list(positions) if positions is not None else [None] * len(messages)
        carried = list(headers) if headers is not None else [None] * len(messages)
        if len(where) != len(messages) or len(carried) != len(messages):
            raise ValueError("one position and one set of headers per message")
        result = BatchResult()
        forgotten = await self._forgotten(messages, where)
        messages = [m for m, gone in zip(messages, forgotten, strict=True) if not gone]
        where = [p for p, gone in zip(where, forgotten, strict=True) if not gone]
        carried = [h for h, gone in zip(carried, forgotten, strict=True) if not gone]
        result.forgotten = sum(forgotten)
        exchanges = [m for m in messages if isinstance(m, Exchange)]
        vectors = iter(await self._embed(exchanges))  # in the order of `exchanges`
        touched: dict[str, None] = {}
        for msg, pos, hdrs in zip(messages, where, carried, strict=True):
            touched[msg.key] = None
            with telemetry.consumed(
                t.EXCHANGES,
                hdrs,
                pos.partition if pos else None,
                pos.offset if pos else None,
                attributes={"messaging.kafka.message.key": msg.key},
            ):
                if isinstance(msg, Exchange):
                    decision = await self._decide(msg, *next(vectors), pos)
                else:
                    decision = await self._apply_control(msg, pos)
            result.decisions.append(decision)
            if decision.left_out:
                log.warning(
                    "exchange.oversized",
                    namespace=msg.namespace,
                    session_id=msg.session_id,
                    seq=getattr(msg, "seq", None),
                    encoded=len(decision.finalized),
                    left_out=decision.left_out,
                    effect="the rest is kept in its raw turns, searched by their passages",
                )
            result.segments += len(decision.finalized)
            result.replays += decision.action == "replay"
            result.redeliveries += decision.action == "redelivery"
            if decision.action not in ("replay", "redelivery") and isinstance(msg, Exchange):
                result.turns += len(msg.turns)
        await self.drain(list(touched))
        return result

    async def _forgotten(
        self, messages: Sequence[ExchangeTopicMessage], where: Sequence[Position | None]
    ) -> list[bool]:
        """Which messages lie below a forget fence (read before the forget was sent)."""
        items = [
            (m.namespace, m.session_id, Source(p.partition, p.offset) if p else None)
            for m, p in zip(messages, where, strict=True)
        ]
        stale = await self.store.fences.stale(items)
        # a message without a position cannot be placed: only positioned ones are fenced
        return [s and p is not None for s, p in zip(stale, where, strict=True)]

    async def forget(
        self, namespace: str, session_id: str | None, exchanges_end: dict[int, int]
    ) -> int:
        """Fence the namespace (or session) at `exchanges_end`, then delete every Redis key
        of its sessions holding nothing from after the fence (state, outbox, replay counter
        and the gateway's sequence keys, whose highest seq stays on a floor keyed by a hash:
        `SessionStore.forget_gateway`) and cut the others at it (`_cut_at_fence`; the
        gateway's ids of what is forgotten freed: `SessionStore.forget_gateway_below`).
        Returns the number of keys deleted."""
        await self.store.fences.raise_to(namespace, session_id, exchanges_end)
        removed, kept = await self.store.forget(namespace, session_id)
        for key in sorted(kept):
            removed += await self._cut_at_fence(key)
        await self.drain(sorted(kept))
        head = f"{glob_escape(namespace)}/{glob_escape(session_id) if session_id else '*'}"
        gateway: dict[str, list[str]] = {}
        pattern = gateway_key(head, "*", self.store.prefix)
        async for raw in self.store.redis.scan_iter(match=pattern, count=1000):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            gateway.setdefault(name[name.index("{") + 1 : name.rindex("}")], []).append(name)
        for key, names in sorted(gateway.items()):
            removed += await self.store.forget_gateway_below(
                key, exchanges_end, names, kept=key in kept
            )
        if kept:
            log.info(
                "forget.sessions_kept",
                sessions=len(kept),
                note="begun after the forget: their content is newer",
            )
        return removed

    async def drain(self, keys: Sequence[str]) -> int:
        """Publish the outbox entries of these sessions, then delete exactly those.

        A concurrent drainer of the same session may publish an entry twice (ids are
        deterministic downstream), but an entry is only ever deleted by a drainer that
        published it."""
        pending = [(k, await self.store.pending(k)) for k in keys]
        flat = [m for _, entries in pending for _, m in entries]
        if not flat:
            return 0
        await self.publisher.publish(flat)
        for k, entries in pending:
            await self.store.trim(k, [entry_id for entry_id, _ in entries])
        return len(flat)

    async def drain_pending(self, grace_s: float, limit: int = 500) -> int:
        """Publish outboxes left behind: older than `grace_s`, so that the agent, which
        drains what it commits within its batch, is rarely raced."""
        keys = await self.store.pending_sessions(self.clock() - grace_s, limit)
        published = await self.drain(keys) if keys else 0
        if published:
            log.info("outbox.drained", sessions=len(keys), messages=published)
        return published

    async def flush_idle(self, idle_timeout_s: float) -> int:
        """Finalize open segments of sessions idle for longer than the timeout.

        The flush has no input position: it changes the state like any message, and a
        redelivered message is still fenced by the position of the last real one."""
        keys = await self.store.idle_sessions(self.clock() - idle_timeout_s)
        closed = 0
        for key in keys:
            namespace, _, session_id = key.partition("/")
            ctl = SessionControl(kind=ControlKind.flush, namespace=namespace, session_id=session_id)
            decision = await self._apply_control(
                ctl, None, idle_before=self.clock() - idle_timeout_s
            )
            closed += len(decision.finalized)
        await self.drain(keys)
        return closed

    # -- internals ----------------------------------------------------------------------

    async def _embed(self, exchanges: Sequence[Exchange]) -> list[tuple[Matrix, list[Matrix]]]:
        return await asyncio.to_thread(embed_exchanges, self.embedder, exchanges)

    async def _decide(
        self, ex: Exchange, vec: Matrix, turn_vecs: list[Matrix], pos: Position | None
    ) -> Decision:
        """`_apply_exchange` as the span `segmenter.decide`, the boundary signals its
        attributes; what it produces carries its context."""
        with telemetry.span("segmenter.decide") as span:
            decision = await self._apply_exchange(ex, vec, turn_vecs, pos)
            if span.is_recording():
                telemetry.set_attributes(span, decision_attributes(ex, decision))
            return decision

    async def _apply_exchange(
        self, ex: Exchange, vec: Matrix, turn_vecs: list[Matrix], pos: Position | None
    ) -> Decision:
        for _ in range(self.max_conflicts):
            version, state = await self.store.load(ex.key)
            state = state or SessionState(namespace=ex.namespace, session_id=ex.session_id)
            if state.seen(pos):
                return Decision("redelivery", None, [])
            decision = self.policy.step(state, ex, vec, self.clock(), pos, telemetry.traceparent())
            if decision.action == "replay" and _elsewhere(state, pos):
                raise Unprocessable(_late_elsewhere(ex, state, pos))
            if decision.action == "replay":
                if (new := await self.store.unapplied(ex.key, ex.named_turns())) is not None:
                    raise Unprocessable(_never_applied(ex, state, new))
                log.info("exchange.replayed", key=ex.key, seq=ex.seq, last_seq=state.last_seq)
                await self.store.count_replay(ex.key, pos)
                return decision
            if (reused := await self.store.claim_turns(ex.key, ex.named_turns())) is not None:
                raise Unprocessable(
                    f"turn_id {reused!r} of session {ex.key} names a turn with other words than "
                    "before: a turn id (or an exchange id, whose turns take it) names one turn"
                )
            state.mark(pos)
            outbox = self._turn_messages(ex, turn_vecs, pos) + _segment_messages(decision.finalized)
            done = await self.store.commit(ex.key, version, state, outbox, now=self.clock())
            if done == 1:
                return decision
            # 0: another writer won; 2: the state began before a forget fence: cut it there,
            # and a message from before that forget must not start a new one
            if done == 2:
                await self._cut_at_fence(ex.key)
                if pos is not None and (await self._forgotten([ex], [pos]))[0]:
                    await self.store.release_turns(ex.key, ex.named_turns())
                    return Decision("forgotten", None, [])
        raise StateConflict(f"session {ex.key} changed under us {self.max_conflicts} times")

    async def _apply_control(
        self, ctl: SessionControl, pos: Position | None, idle_before: float | None = None
    ) -> Decision:
        for _ in range(self.max_conflicts):
            version, state = await self.store.load(ctl.key)
            if state is None:
                return Decision("noop", None, [])
            if state.seen(pos):
                return Decision("redelivery", None, [])
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
            state.mark(pos)
            outbox = _segment_messages(finalized)
            done = await self.store.commit(ctl.key, version, state, outbox, ttl, now=self.clock())
            if done == 2:
                await self._cut_at_fence(ctl.key)
            elif done == 1:
                if finalized:
                    log.info(
                        "segment.flushed",
                        key=ctl.key,
                        kind=ctl.kind.value,
                        idle=idle_before is not None,
                    )
                return Decision("flush", None, finalized)
        raise StateConflict(f"session {ctl.key} changed under us {self.max_conflicts} times")

    async def _cut_at_fence(self, key: str) -> int:
        """Cut a session state begun before a forget fence: what it holds from before the
        fence is dropped, the exchanges it applied from after it (read before this stage saw
        the forget) are finalized as a segment of their own, and the counters that keep ids
        unique are kept. A state with nothing from after the fence is deleted. Returns the
        number of keys deleted."""
        namespace, _, session_id = key.partition("/")
        for _ in range(self.max_conflicts):
            version, state = await self.store.load(key)
            if state is None or state.partition < 0 or state.first_offset < 0:
                return 0
            first, last = (
                Source(state.partition, o) for o in (state.first_offset, state.last_offset)
            )
            entries = await self.store.pending(key)
            marks = exchange_sources(state.exchanges)
            stale = await self.store.fences.stale(
                [(namespace, session_id, s) for s in [first, last, *marks]]
                + [(namespace, session_id, source_of(m.headers)) for _, m in entries]
            )
            (began_before, ended_before), n = stale[:2], len(marks)
            old_exchanges, old_entries = stale[2 : 2 + n], stale[2 + n :]
            if not began_before:
                return 0  # begun after every fence: nothing to cut
            if ended_before:
                removed = await self.store.forget_session(key)  # all of it from before
                if removed >= 0:
                    return removed
                continue  # a message from after the fence was applied meanwhile
            await self.store.trim(
                key, [i for (i, _), o in zip(entries, old_entries, strict=True) if o]
            )
            kept = [x for x, o in zip(state.exchanges, old_exchanges, strict=True) if not o]
            kept_from = [m.offset for m, o in zip(marks, old_exchanges, strict=True) if m and not o]
            cut = SessionState(
                namespace=namespace,
                session_id=session_id,
                last_seq=state.last_seq,
                next_index=state.next_index,
                exchanges=kept,
                tokens=sum(x.tokens for x in kept),
                session_date=state.session_date,
                updated_at=state.updated_at,
                ended=state.ended,
                partition=state.partition,
                last_offset=state.last_offset,
                first_offset=min(kept_from, default=last.offset),
            )
            finalized = self.policy.flush(cut)
            ttl = self.ended_ttl_s if cut.ended else 0
            done = await self.store.commit(
                key, version, cut, _segment_messages(finalized), ttl, now=self.clock()
            )
            if done == 1:
                log.info(
                    "forget.session_cut",
                    key=key,
                    kept_exchanges=len(kept),
                    dropped_exchanges=len(state.exchanges) - len(kept),
                )
                return 0
        raise StateConflict(f"session {key} changed under us {self.max_conflicts} times")

    def _turn_messages(
        self, ex: Exchange, turn_vecs: list[Matrix], pos: Position | None = None
    ) -> list[OutMessage]:
        lineage = (Source(pos.partition, pos.offset).header(),) if pos is not None else ()
        headers = telemetry.inject(lineage)  # the outbox keeps the context it was made in
        return [
            OutMessage(t.TURNS, ex.key, raw.model_dump_json().encode(), headers)
            for raw in raw_turns(ex, turn_vecs, self.embedder.model_name)
        ]


def _segment_messages(segments: Sequence[Segment]) -> list[OutMessage]:
    out = []
    for s in segments:
        src = segment_lineage(s)
        out.append(
            OutMessage(
                t.SEGMENTS,
                session_key(s.namespace, s.session_id),
                s.model_dump_json().encode(),
                telemetry.inject((src.header(),) if src is not None else ()),
            )
        )
    return out


def decision_attributes(ex: Exchange, decision: Decision) -> dict[str, object]:
    """A decision as span attributes: the action, the segments it closed, the signals."""
    attrs: dict[str, object] = {
        "lychee.session": ex.key,
        "lychee.exchange.seq": ex.seq,
        "lychee.segmenter.action": decision.action,
        "lychee.segmenter.finalized": len(decision.finalized),
        "lychee.segmenter.segment_ids": [s.segment_id for s in decision.finalized] or None,
        "lychee.segmenter.reasons": [s.reason.value for s in decision.finalized] or None,
    }
    if decision.signals is not None:
        for name, value in decision.signals.model_dump().items():
            attrs[f"lychee.segmenter.signal.{name}"] = value
    return attrs


def _elsewhere(state: SessionState, pos: Position | None) -> bool:
    """Whether a message the seq fence stops came from another partition than the session's:
    not the same log read again but two producers placing one session apart (a keyless
    producer, or librdkafka's default partitioner beside murmur2), so the earlier seq was
    read late, not twice. Dropping it as a replay would lose it without a word."""
    return pos is not None and state.partition >= 0 and pos.partition != state.partition


def _never_applied(ex: Exchange, state: SessionState, turn_id: str) -> str:
    """Why an exchange behind the seq fence that is no replay (the session never had its
    turn) is refused: dropped as one, it would be lost without a word."""
    return (
        f"exchange {ex.exchange_id!r} of session {ex.key} has seq {ex.seq}, at or below seq "
        f"{state.last_seq} applied already, but the session never had its turn {turn_id!r} "
        "(or had other words under it): a seq is given to one exchange, in order. Two "
        "producers numbering one session (a gateway numbers after what is applied, not after "
        "what another producer still has on its way) or a producer sending out of order; "
        f"send it again with a seq above {state.last_seq}"
    )


def _late_elsewhere(ex: Exchange, state: SessionState, pos: Position | None) -> str:
    where = pos.partition if pos else "?"
    return (
        f"exchange seq {ex.seq} of session {ex.key} came on partition {where} after seq "
        f"{state.last_seq} had come on partition {state.partition}: a session's messages must "
        "all be on one partition, in order. Key every message by namespace/session_id with "
        "Kafka's murmur2 partitioner (the gateway's and aiokafka's; confluent-kafka: "
        "partitioner=murmur2_random)"
    )
