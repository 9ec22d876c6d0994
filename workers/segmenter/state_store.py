"""Per-session segmenter state in Redis, with optimistic versioning and an outbox.

The state and the messages it produces are written by one Lua script, so after a
kill -9 they cannot disagree: either both the new state and its outbox entries exist
or neither does. Outbox entries are published and only then trimmed; a crash in
between republishes them, and downstream writes are idempotent on the ids inside.

The outbox is a Redis stream per session: every entry has its own increasing id, and
a trim deletes exactly the ids that were published. Two drainers of one session (the
agent and the idle timer, or two processes across a rebalance) may therefore publish
an entry twice, which is harmless, but never delete one the other has not read. The
same scripts keep `pending`, a sorted set of the sessions whose outbox is not empty
scored by the time of their oldest entry, so a drainer finds outboxes that nobody
published (a publish that failed after the commit, a process killed in between)
without waiting for the session's next message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from workers.forget import Fences, acked_at, fence_key, gateway_key, glob_escape, seq_floor_key
from workers.ports import OutMessage
from workers.segmenter.policy import Position, SessionState

# Lua: the highest forget fence (workers.forget) of partition ARGV[p] over KEYS[a], KEYS[b]
_FENCE = """
local function fence(a, b, part)
  local f1 = tonumber(redis.call('HGET', KEYS[a], 'p' .. part) or '-1')
  local f2 = tonumber(redis.call('HGET', KEYS[b], 'p' .. part) or '-1')
  return math.max(f1, f2)
end
"""

# KEYS: state, outbox, active, pending, namespace fence, session fence, replays
# ARGV: version, state json, session key, active score ('' = not open), ttl_s, now,
#       partition, first offset, entries...
# Entry ids are `<major>-<i>`, `major` the new state version (or one past the stream's
# last id when an expired state restarted its versions), so they only ever increase.
# A state whose first applied message lies below a forget fence is stale: nothing is
# written (returns 2) and the caller cuts the state at the fence first.
_COMMIT = (
    _FENCE
    + """
if ARGV[7] ~= '-1' and tonumber(ARGV[8]) < fence(5, 6, ARGV[7]) then return 2 end
local v = redis.call('HGET', KEYS[1], 'v')
if (v or '0') ~= ARGV[1] then return 0 end
local nv = tonumber(ARGV[1]) + 1
redis.call('HSET', KEYS[1], 'v', tostring(nv), 'state', ARGV[2])
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[3], ARGV[3])
else
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
end
if tonumber(ARGV[5]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[5])
else
  redis.call('PERSIST', KEYS[1])
end
if #ARGV >= 9 then
  local major = nv
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if #last > 0 then
    local lm = tonumber(string.match(last[1][1], '^(%d+)'))
    if lm >= major then major = lm + 1 end
  end
  for i = 9, #ARGV do
    redis.call('XADD', KEYS[2], major .. '-' .. (i - 8), 'm', ARGV[i], 'at', ARGV[6])
  end
  redis.call('ZADD', KEYS[4], 'NX', ARGV[6], ARGV[3])
end
return 1
"""
)

# KEYS: outbox, pending; ARGV: session key, published ids...
# Deletes exactly the published entries; the session leaves `pending` only when its
# outbox is empty, else its score moves to the oldest entry still there.
_TRIM = """
redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
local f = first[1][2]
for i = 1, #f, 2 do
  if f[i] == 'at' then redis.call('ZADD', KEYS[2], 'XX', f[i + 1], ARGV[1]) end
end
return redis.call('XLEN', KEYS[1])
"""

# KEYS: replays hash; ARGV: partition, offset (-1 -1: unknown), ttl_s
# Counts a replayed exchange once: a redelivery of the same message is not counted again.
_REPLAY = """
local p = tonumber(ARGV[1])
local o = tonumber(ARGV[2])
if o >= 0 then
  local seen = redis.call('HMGET', KEYS[1], 'p', 'o')
  if seen[1] and tonumber(seen[1]) == p and tonumber(seen[2]) >= o then return 0 end
  redis.call('HSET', KEYS[1], 'p', p, 'o', o)
end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


# KEYS: the session's turns (turn id -> digest of its words). ARGV: ttl s, then per turn its
# id and digest. Returns the first id that names other words than before (nothing stored
# then), else nothing, with every id recorded.
_TURNS = """
for i = 2, #ARGV - 1, 2 do
  local held = redis.call('HGET', KEYS[1], ARGV[i])
  if held and held ~= ARGV[i + 1] then return ARGV[i] end
end
for i = 2, #ARGV - 1, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return false
"""


# KEYS: a forgotten session's seq floor (`seq_floor_key`), the gateway's meta hash of it,
# then its other gateway keys. Raises the floor to the highest seq the gateway gave (its
# counter or accepted watermark), for as long as the meta would have lived, then deletes
# the gateway's keys; returns how many existed.
_GATEWAY = """
local top = -1
for _, field in ipairs({'alloc', 'accepted'}) do
  local v = tonumber(redis.call('HGET', KEYS[2], field) or '-1')
  if v > top then top = v end
end
if top > tonumber(redis.call('GET', KEYS[1]) or '-1') then
  local ttl = redis.call('TTL', KEYS[2])
  if ttl > 0 then redis.call('SET', KEYS[1], top, 'EX', ttl) else redis.call('SET', KEYS[1], top) end
end
return redis.call('DEL', unpack(KEYS, 2))
"""


# KEYS: the session's turns. ARGV: per turn its id and digest. Deletes each id that still
# names that digest (what one message claimed), nothing another claim changed.
_RELEASE = """
for i = 1, #ARGV - 1, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return 0
"""


# KEYS: state, outbox, replays, active, pending, namespace fence, session fence, turns
# ARGV: session key
# Forget one session's state unless it applied a message from after the fence (an
# exchange read before this stage saw the forget): such a state is kept (returns -1) for
# the caller to cut at the fence. Otherwise returns the number of keys deleted.
_FORGET = (
    _FENCE
    + """
-- the forgotten turns' ids are free again, also in a state cut at the fence
local turns = redis.call('DEL', KEYS[8])
local raw = redis.call('HGET', KEYS[1], 'state')
if raw then
  local st = cjson.decode(raw)
  local part, last = tonumber(st['partition'] or -1), tonumber(st['last_offset'] or -1)
  if part >= 0 and last >= 0 then
    local f = fence(6, 7, tostring(part))
    if f >= 0 and last >= f then return -1 end
  end
end
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
return turns + redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
"""
)

_TRIM_CHUNK = 1000


class SessionStore:
    def __init__(self, redis: Redis, prefix: str = "lychee") -> None:
        self.redis = redis
        self.prefix = prefix
        self.fences = Fences(redis, prefix)
        self.active_key = f"{prefix}:seg:active"
        self.pending_key = f"{prefix}:seg:pending"
        self._commit = redis.register_script(_COMMIT)
        self._trim = redis.register_script(_TRIM)
        self._replay = redis.register_script(_REPLAY)
        self._forget = redis.register_script(_FORGET)
        self._turns = redis.register_script(_TURNS)
        self._release = redis.register_script(_RELEASE)
        self._gateway = redis.register_script(_GATEWAY)

    def _state_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:state"

    def _outbox_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:outq"

    def _replays_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:replays"

    def _turns_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:turns"

    async def claim_turns(
        self, key: str, turns: Sequence[tuple[str, str]], ttl_s: int = 30 * 24 * 3600
    ) -> str | None:
        """Record each (turn id, digest of its words) of the session; the first id that
        named other words before, if any (then nothing is recorded)."""
        if not turns:
            return None
        args: list[str | int] = [ttl_s, *(v for pair in turns for v in pair)]
        found = await self._turns(keys=[self._turns_key(key)], args=args)
        return None if found is None else _text(found)

    async def unapplied(self, key: str, turns: Sequence[tuple[str, str]]) -> str | None:
        """The first turn id the session does not hold with these words (`claim_turns`):
        of a message the seq fence stops, a turn the session never had. None when the
        session holds no turn ids at all (they expired, or a forget cut the session): then
        it cannot tell, and the message is taken for the replay the fence says it is."""
        name = self._turns_key(key)
        if not turns or not await self.redis.exists(name):
            return None
        held = await self.redis.hmget(name, [t for t, _ in turns])
        for (tid, digest), got in zip(turns, held, strict=True):
            if got is None or _text(got) != digest:
                return tid
        return None

    async def release_turns(self, key: str, turns: Sequence[tuple[str, str]]) -> None:
        """Undo `claim_turns` for a message that turned out to be forgotten: a forget between
        its claim and its commit deleted the session's ids, and its claim would otherwise
        refuse the session's next words under those ids."""
        await self._release_all(self._turns_key(key), turns)

    async def _release_all(self, name: str, entries: Sequence[tuple[str, str]]) -> None:
        """Delete each field of hash `name` that still holds its value (`_RELEASE`), in
        chunks: Lua's unpack() is bounded."""
        for start in range(0, len(entries), _TRIM_CHUNK):
            args = [v for pair in entries[start : start + _TRIM_CHUNK] for v in pair]
            await self._release(keys=[name], args=args)

    async def load(self, key: str) -> tuple[str, SessionState | None]:
        version, raw = await self.redis.hmget(self._state_key(key), ["v", "state"])
        v = version.decode() if isinstance(version, bytes) else str(version or "0")
        return v, SessionState.model_validate_json(raw) if raw else None

    async def commit(
        self,
        key: str,
        version: str,
        state: SessionState,
        outbox: Sequence[OutMessage],
        ttl_s: int = 0,
        now: float = 0.0,
    ) -> int:
        """Write state and outbox atomically if nobody wrote since `version` was read;
        `now` dates the outbox entries (for `pending_sessions`). Returns 1 when written,
        0 on a conflict, 2 when the state began before a forget fence (nothing written)."""
        entries = [
            orjson.dumps(
                {
                    "t": m.topic,
                    "k": m.key,
                    "v": m.value.decode(),
                    "h": [[n, v.decode()] for n, v in m.headers],
                }
            )
            for m in outbox
        ]
        score = repr(state.updated_at) if state.is_open else ""
        args: list[Any] = [
            version,
            state.model_dump_json(),
            key,
            score,
            ttl_s,
            repr(now),
            state.partition,
            state.first_offset,
            *entries,
        ]
        keys = [
            self._state_key(key),
            self._outbox_key(key),
            self.active_key,
            self.pending_key,
            *self._fence_keys(key),
            self._replays_key(key),
        ]
        return int(await self._commit(keys=keys, args=args))

    def _fence_keys(self, key: str) -> list[str]:
        namespace, _, session_id = key.partition("/")
        return [
            fence_key(namespace, None, self.prefix),
            fence_key(namespace, session_id, self.prefix),
        ]

    async def forget(self, namespace: str, session_id: str | None) -> tuple[int, set[str]]:
        """Delete the state, outbox and replay counter of every session of `namespace` (or
        of one session) that holds nothing from after the fence, and every session's turn
        ids; returns the number of keys deleted and the sessions kept (they applied a message
        from after the fence, and are cut there by the caller). The fence must be raised
        first."""
        head = f"{glob_escape(namespace)}/{glob_escape(session_id) if session_id else '*'}"
        sessions: set[str] = set()
        async for raw in self.redis.scan_iter(match=f"{self.prefix}:seg:{{{head}}}:*", count=1000):
            name = _text(raw)
            sessions.add(name[name.index("{") + 1 : name.rindex("}")])
        for zset in (self.active_key, self.pending_key):
            async for member, _ in self.redis.zscan_iter(zset, match=head, count=1000):
                sessions.add(_text(member))
        removed, kept = 0, set()
        for key in sorted(sessions):
            n = await self.forget_session(key)
            if n >= 0:
                removed += n
            else:
                kept.add(key)
        return removed, kept

    async def forget_session(self, key: str) -> int:
        """`forget` of one session: the number of keys deleted, -1 when it was kept."""
        keys = [
            self._state_key(key),
            self._outbox_key(key),
            self._replays_key(key),
            self.active_key,
            self.pending_key,
            *self._fence_keys(key),
            self._turns_key(key),
        ]
        return int(await self._forget(keys=keys, args=[key]))

    async def forget_gateway(self, key: str, names: Sequence[str]) -> int:
        """Delete the gateway's keys `names` of a forgotten session, keeping the highest seq
        it gave on the session's seq floor (`seq_floor_key`): exchanges it numbered before
        the forget may still be unread, and a number given again would be taken for a
        replay of theirs. Returns the number of keys deleted."""
        meta = gateway_key(key, "meta", self.prefix)
        keys = [seq_floor_key(key, self.prefix), meta, *(n for n in names if n != meta)]
        return int(await self._gateway(keys=keys, args=[]))

    async def forget_gateway_below(
        self, key: str, fence: Mapping[int, int], names: Sequence[str], kept: bool
    ) -> int:
        """The gateway's part of a forget of a session: its keys `names` deleted
        (`forget_gateway`) when it holds no id acked after the `fence` and the segmenter did
        not keep the session; else only the ids of its exchanges acked below the fence (their
        broker offset is in each id's value) and the turn ids those made by default
        (`exchange_id#i`) are freed: a re-add of a forgotten exchange is new, not a duplicate,
        and a retry of one from after the fence is still a duplicate. An id not acked yet is
        left as it is (a retry keeps its seq). Returns the number of keys deleted."""
        ids, turns = gateway_key(key, "ids", self.prefix), gateway_key(key, "turns", self.prefix)
        gone: dict[str, str] = {}
        left = 0
        async for field, value in self.redis.hscan_iter(ids, count=1000):
            said = _text(value)
            at = acked_at(said)
            if at is None:
                continue  # in flight (or not the gateway's): kept, but holds nothing acked
            part, offset = at
            if offset < fence.get(part, -1):
                gone[_text(field)] = said
            else:
                left += 1
        if not kept and not left:
            return await self.forget_gateway(key, names)
        made: dict[str, str] = {}
        async for field, value in self.redis.hscan_iter(turns, count=1000):
            tid = _text(field)
            eid, sep, index = tid.rpartition("#")
            if sep and index.isdigit() and eid in gone:
                made[tid] = _text(value)
        await self._release_all(ids, list(gone.items()))
        await self._release_all(turns, list(made.items()))
        return 0

    async def pending(self, key: str) -> list[tuple[str, OutMessage]]:
        """The outbox of one session, oldest first, each entry with its id."""
        raw = await self.redis.xrange(self._outbox_key(key), "-", "+")
        out = []
        for entry_id, fields in raw or []:
            assert fields is not None  # an entry always has its field
            d = orjson.loads(fields[b"m"])
            headers = tuple((n, v.encode()) for n, v in d.get("h", ()))
            out.append((_text(entry_id), OutMessage(d["t"], d["k"], d["v"].encode(), headers)))
        return out

    async def trim(self, key: str, entry_ids: Sequence[str]) -> int:
        """Delete exactly these (published) entries; returns how many are left."""
        if not entry_ids:
            return int(await self.redis.xlen(self._outbox_key(key)))
        keys = [self._outbox_key(key), self.pending_key]
        left = 0
        for start in range(0, len(entry_ids), _TRIM_CHUNK):  # Lua's unpack() is bounded
            chunk = entry_ids[start : start + _TRIM_CHUNK]
            left = int(await self._trim(keys=keys, args=[key, *chunk]))
        return left

    async def pending_sessions(self, before: float, limit: int = 500) -> list[str]:
        """Sessions whose oldest unpublished outbox entry was written before `before`."""
        raw = await self.redis.zrangebyscore(self.pending_key, "-inf", before, start=0, num=limit)
        return [_text(r) for r in raw]

    async def idle_sessions(self, before: float, limit: int = 500) -> list[str]:
        raw = await self.redis.zrangebyscore(self.active_key, "-inf", before, start=0, num=limit)
        return [_text(r) for r in raw]

    async def count_replay(
        self, key: str, position: Position | None, ttl_s: int = 30 * 24 * 3600
    ) -> bool:
        """Count one exchange fenced as a replay (not again when it is redelivered)."""
        p, o = (position.partition, position.offset) if position else (-1, -1)
        return bool(await self._replay(keys=[self._replays_key(key)], args=[p, o, ttl_s]))

    async def replays(self, keys: Sequence[str]) -> dict[str, int]:
        """Exchanges fenced as replays so far, per session (sessions without any: 0)."""
        out = {}
        for k in keys:
            raw = await self.redis.hget(self._replays_key(k), "n")
            out[k] = int(raw or 0)
        return out

    async def last_seqs(self, keys: Sequence[str]) -> dict[str, int]:
        """The last applied `seq` per session; -1 for a session without state."""
        out = {}
        for k in keys:
            _, state = await self.load(k)
            out[k] = state.last_seq if state is not None else -1
        return out


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
