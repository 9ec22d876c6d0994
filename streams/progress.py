"""How far each session has come through the pipeline, read from Redis.

Three watermarks per session, each the highest `seq` that reached a point:
- accepted: acked by the broker for the gateway (`streams.seqs` writes it);
- segmented: applied by the segmenter (its own state, `last_seq`);
- indexed: raw turns written to LanceDB (the indexer writes it after each write).

Turns of one session travel one partition in order and the indexer writes them in order, so
an indexed watermark at or past a seq means every earlier seq of that session is searchable
too (as raw turns; records follow once the session's segment is encoded).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from redis.asyncio import Redis

from schemas import RawTurn, session_key
from workers.forget import RAISE_FIELDS, acked_at, gateway_key
from workers.segmenter.state_store import SessionStore

PREFIX = "lychee"


def accepted_key(namespace: str, prefix: str = PREFIX) -> str:
    return f"{prefix}:gw:ns:{{{namespace}}}:accepted"


def indexed_key(namespace: str, prefix: str = PREFIX) -> str:
    return f"{prefix}:idx:ns:{{{namespace}}}:seq"


def written_key(namespace: str, prefix: str = PREFIX) -> str:
    """When the indexer last wrote turns of the namespace (epoch ms)."""
    return f"{prefix}:idx:ns:{{{namespace}}}:written"


@dataclass(frozen=True)
class SessionProgress:
    session_id: str
    accepted: int | None
    segmented: int | None
    indexed: int | None
    open_exchanges: int
    ended: bool

    @property
    def searchable(self) -> bool:
        """Everything the gateway accepted for the session is indexed (as raw turns)."""
        return self.accepted is None or (self.indexed is not None and self.indexed >= self.accepted)


class Progress:
    def __init__(self, redis: Redis, prefix: str = PREFIX) -> None:
        self.redis = redis
        self.prefix = prefix
        self.sessions = SessionStore(redis, prefix)
        self._raise = redis.register_script(RAISE_FIELDS)  # watermarks never go back

    async def record_indexed(self, turns: Iterable[RawTurn]) -> None:
        """Raise each session's indexed watermark to the highest seq whose exchange `turns`
        complete (an exchange cut short by the batch marks only the seq before it)."""
        top: dict[str, dict[str, int]] = defaultdict(dict)
        for turn in turns:
            per_ns = top[turn.namespace]
            whole = turn.seq if turn.closes_exchange() else turn.seq - 1
            per_ns[turn.session_id] = max(per_ns.get(turn.session_id, -1), whole)
        now_ms = int(time.time() * 1000)
        for ns, seqs in top.items():
            args = [0, *(x for sid, seq in seqs.items() for x in (sid, seq))]
            await self._raise(keys=[indexed_key(ns, self.prefix)], args=args)
            await self.redis.set(written_key(ns, self.prefix), now_ms)

    async def raise_accepted(self, namespace: str, seqs: dict[str, int]) -> None:
        if seqs:
            args = [0, *(x for sid, seq in seqs.items() for x in (sid, seq))]
            await self._raise(keys=[accepted_key(namespace, self.prefix)], args=args)

    async def forget(self, namespace: str, session_id: str | None, fence: Mapping[int, int]) -> int:
        """Drop the watermarks of a namespace's sessions (or of one session), except those
        of a session the gateway holds an exchange of in flight, or acked at or after the
        forget's `fence` (the offsets of memory.exchanges before it): written after the
        forget, that one may be indexed already, and its receipt waits on them. Returns the
        keys deleted."""
        keys = [accepted_key(namespace, self.prefix), indexed_key(namespace, self.prefix)]
        if session_id is not None:
            sessions = [session_id]
        else:
            sessions = sorted({*await self._all(keys[0]), *await self._all(keys[1])})
        gone = [s for s in sessions if not await self._acked_after(namespace, s, fence)]
        if session_id is None and len(gone) == len(sessions):
            return int(await self.redis.delete(*keys, written_key(namespace, self.prefix)))
        for key in keys:
            if gone:
                await self.redis.hdel(key, *gone)
        return 0

    async def _acked_after(self, namespace: str, session_id: str, fence: Mapping[int, int]) -> bool:
        ids = gateway_key(session_key(namespace, session_id), "ids", self.prefix)
        async for _, value in self.redis.hscan_iter(ids, count=1000):
            at = acked_at(_text(value))  # None: still in flight, so maybe after: kept
            if at is None or at[1] >= fence.get(at[0], -1):
                return True
        return False

    async def accepted(self, namespace: str, session_ids: Sequence[str]) -> dict[str, int]:
        return await self._read(accepted_key(namespace, self.prefix), session_ids)

    async def indexed(self, namespace: str, session_ids: Sequence[str]) -> dict[str, int]:
        return await self._read(indexed_key(namespace, self.prefix), session_ids)

    async def _read(self, key: str, fields: Sequence[str]) -> dict[str, int]:
        if not fields:
            return {}
        values = await self.redis.hmget(key, list(fields))
        return {f: int(v) for f, v in zip(fields, values, strict=True) if v is not None}

    async def _all(self, key: str) -> dict[str, int]:
        raw = await self.redis.hgetall(key)
        return {_text(k): int(v) for k, v in raw.items()}

    async def namespaces(self) -> set[str]:
        """Every namespace with a watermark (accepted by the gateway, or indexed)."""
        found = set()
        for key in (accepted_key("*", self.prefix), indexed_key("*", self.prefix)):
            head, _, tail = key.partition("*")
            async for name in self.redis.scan_iter(match=key, count=1000):
                found.add(_text(name).removeprefix(head).removesuffix(tail))
        return found

    async def overview(self, namespace: str) -> tuple[bool, datetime | None]:
        """Whether everything the gateway accepted for the namespace is indexed, and when the
        indexer last wrote its turns."""
        accepted = await self._all(accepted_key(namespace, self.prefix))
        indexed = await self._all(indexed_key(namespace, self.prefix))
        written = await self.redis.get(written_key(namespace, self.prefix))
        searchable = all(indexed.get(sid, -1) >= seq for sid, seq in accepted.items())
        at = datetime.fromtimestamp(int(written) / 1000, UTC) if written else None
        return searchable, at

    async def namespace(
        self, namespace: str, session_id: str | None = None
    ) -> list[SessionProgress]:
        """Every session the gateway accepted or the indexer wrote, in session-id order."""
        if session_id is not None:
            accepted = await self._read(accepted_key(namespace, self.prefix), [session_id])
            indexed = await self._read(indexed_key(namespace, self.prefix), [session_id])
            ids = [session_id]
        else:
            accepted = await self._all(accepted_key(namespace, self.prefix))
            indexed = await self._all(indexed_key(namespace, self.prefix))
            ids = sorted(accepted.keys() | indexed.keys())
        out = []
        for sid in ids:
            _, state = await self.sessions.load(session_key(namespace, sid))
            out.append(
                SessionProgress(
                    session_id=sid,
                    accepted=accepted.get(sid),
                    segmented=state.last_seq if state and state.last_seq >= 0 else None,
                    indexed=indexed.get(sid),
                    open_exchanges=len(state.exchanges) if state else 0,
                    ended=bool(state and state.ended),
                )
            )
        return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
