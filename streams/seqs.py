"""Per-session `seq` numbers for producers whose callers do not number their exchanges.

The segmenter applies a session's exchanges once each and in increasing `seq`: one that
arrives with a seq at or below the last applied is a replay and changes nothing. A producer
that numbers exchanges for its callers must therefore (1) never give one seq twice, (2) put
a session's exchanges on its partition in seq order, and (3) give a re-sent exchange id the
seq (and receipt) it had. Here:

- `allocate` is one Lua script per session: an exchange id already acked keeps its seq and
  broker offset (a duplicate, not produced again); a caller's own seq is checked (it must be
  above everything acked or applied, above every seq given to another exchange id, which may
  be on its way to the partition still, and increase within the request: a lower seq
  produced behind a higher one would be dropped as a replay); otherwise the next seq
  after the largest of the counter, the last acked seq, the segmenter's applied `last_seq`
  and the highest seq given before a forget of the session (exchanges numbered then may
  still be unread: a number given again would be dropped as a replay of theirs).
- Order: allocating and enqueueing happen under a per-session lock of this process (aiokafka
  keeps the order of sends to one partition), and a Redis lease makes one process at a time
  the producer of a session while any of its sends for it are unacknowledged, so that two
  gateway replicas cannot interleave one session's seqs on the partition.
- A turn id the caller gave names one turn of the session: `allocate` refuses an exchange
  whose turn reuses an id the session holds (or the request gave) with other words, since the
  stored turn would be replaced and the records citing it would cite the new words. The same
  words again are the same turn (a retry under a new exchange id).
- `confirm`, after the broker's acks, records each id's partition and offset and raises the
  session's accepted watermark (`streams.progress`).

The lease outlives a stalled holder by at most `lease_s`; keep it above the produce timeout.

Usage (the gateway's add, reduced)::

    async with allocator.session(ns, sid, deadline) as s:
        async with s.ordered():
            allocations = await s.allocate([Wanted("ex-1"), Wanted("ex-2")])
            futures = [await producer.send(...) for a in allocations if not a.duplicate]
        acks = await asyncio.gather(*futures)
        await s.confirm([...])
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.asyncio import Redis

from schemas import session_key
from schemas.base import MAX_SEQ
from streams.errors import SeqRejected, SessionBusy
from streams.progress import PREFIX, accepted_key
from workers.forget import gateway_key, seq_floor_key

# KEYS: lease, want. ARGV: token, lease ms, want ms. 1: the lease is ours.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return 1 end
local want = redis.call('GET', KEYS[2])
if not holder and (not want or want == ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if want then redis.call('DEL', KEYS[2]) end
  return 1
end
if not want or want == ARGV[1] then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3]) end
return 0
"""

# An id's value is `seq:partition:offset:digest` (partition and offset -1 until acked).
# KEYS: ids, meta, lease, segmenter state, want, turns, the seq floor a forget left
# (`workers.forget.seq_floor_key`). ARGV: lease token, lease ms, ttl s,
# then per exchange its id, wanted seq (-1: assign), content digest and its named turns as
# JSON ([[turn id, digest], ...]).
# Returns {'ok', last, {seq, duplicate, partition, offset}..., wanted by another} or, writing
# nothing, {reason, index, seq} ('turn': the turn's position in place of the seq).
_ALLOCATE = """
local MAX_SEQ = tonumber('@MAX_SEQ@')
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {'lease', 0, -1} end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
local wanted = redis.call('EXISTS', KEYS[5])
local alloc = tonumber(redis.call('HGET', KEYS[2], 'alloc') or '-1')
local acked = tonumber(redis.call('HGET', KEYS[2], 'accepted') or '-1')
local applied = -1
local raw = redis.call('HGET', KEYS[4], 'state')
if raw then
  local ok, state = pcall(cjson.decode, raw)
  if ok and type(state) == 'table' and tonumber(state['last_seq']) then
    applied = tonumber(state['last_seq'])
  end
end
local floor = math.max(acked, applied)
local forgot = tonumber(redis.call('GET', KEYS[7]) or '-1')
local last = math.max(alloc, floor, forgot)
local prev = floor
local given = alloc  -- the highest seq given to an exchange: a forget's floor is none
local out, writes, named, seen = {}, {}, {}, {}
for i = 1, (#ARGV - 3) / 4 do
  local eid, wanted, digest = ARGV[4 * i], tonumber(ARGV[1 + 4 * i]), ARGV[2 + 4 * i]
  local v = redis.call('HGET', KEYS[1], eid)
  local known, part, off, kdigest = nil, -1, -1, nil
  if v then
    local s, p, o, d = string.match(v, '^(%d+):(%-?%d+):(%-?%d+):(.*)$')
    known, part, off, kdigest = tonumber(s), tonumber(p), tonumber(o), d
  end
  if known and part >= 0 then
    if kdigest ~= digest then return {'changed', i, known} end
    if wanted >= 0 and wanted ~= known then return {'conflict', i, known} end
    out[i] = {known, 1, part, off}
  else
    local seq
    if wanted >= 0 then
      if wanted <= floor then return {'stale', i, floor} end
      if wanted <= prev then return {'order', i, prev} end
      if wanted <= alloc and wanted ~= known then return {'given', i, alloc} end
      seq = wanted
    elseif known and known > prev then
      seq = known
    else
      seq = math.max(last, prev) + 1
      if seq > MAX_SEQ then return {'full', i, seq - 1} end
    end
    for j, turn in ipairs(cjson.decode(ARGV[3 + 4 * i])) do
      local tid, tdigest = turn[1], turn[2]
      local held = seen[tid] or redis.call('HGET', KEYS[6], tid)
      if held and held ~= tdigest then return {'turn', i, j - 1} end
      if not held then
        named[#named + 1] = tid
        named[#named + 1] = tdigest
      end
      seen[tid] = tdigest
    end
    prev = seq
    if seq > last then last = seq end
    if seq > given then given = seq end
    writes[#writes + 1] = eid
    writes[#writes + 1] = seq .. ':-1:-1:' .. digest
    out[i] = {seq, 0, -1, -1}
  end
end
if #writes > 0 then
  redis.call('HSET', KEYS[1], unpack(writes))
  redis.call('HSET', KEYS[2], 'alloc', given)
end
if #named > 0 then
  redis.call('HSET', KEYS[6], unpack(named))
  redis.call('EXPIRE', KEYS[6], ARGV[3])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {'ok', last, out, wanted}
""".replace("@MAX_SEQ@", str(MAX_SEQ))

# KEYS: ids, meta, namespace accepted index. ARGV: ttl s, session id, then per ack: id, seq,
# partition, offset, digest.
_CONFIRM = """
local acked = tonumber(redis.call('HGET', KEYS[2], 'accepted') or '-1')
for i = 3, #ARGV, 5 do
  local value = ARGV[i + 1] .. ':' .. ARGV[i + 2] .. ':' .. ARGV[i + 3] .. ':' .. ARGV[i + 4]
  redis.call('HSET', KEYS[1], ARGV[i], value)
  if tonumber(ARGV[i + 1]) > acked then acked = tonumber(ARGV[i + 1]) end
end
redis.call('HSET', KEYS[2], 'accepted', acked)
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '-1')
if acked > cur then redis.call('HSET', KEYS[3], ARGV[2], acked) end
return acked
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# A process keeps a session's lease while it has sends in flight. Another process that wants
# it leaves a `want` mark (one waiter at a time, refreshed by its polls, gone WANT_MS after its
# last): only the waiter may take a free lease, and the holder, seeing the mark, admits no new
# callers, drains and releases. So a session hot on two replicas is served by both in turn.
POLL_MAX_S = 0.01
WANT_MS = 100


@dataclass(frozen=True)
class Wanted:
    exchange_id: str
    seq: int | None = None
    digest: str = ""  # of the content: a re-sent id must carry what it carried first
    turns: tuple[tuple[str, str], ...] = ()  # the caller's turn ids, each with its digest


@dataclass(frozen=True)
class Allocation:
    exchange_id: str
    seq: int
    duplicate: bool  # acked before: not to be produced again
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Ack:
    exchange_id: str
    seq: int
    partition: int
    offset: int
    digest: str = ""


def segmenter_state_key(key: str, prefix: str = PREFIX) -> str:
    """The segmenter's state key of a session (workers/segmenter/state_store.py)."""
    return f"{prefix}:seg:{{{key}}}:state"


@dataclass
class _Local:
    """One holding of a session by this process: its lock, its lease token (one per holding, so
    that a late release never deletes a later holding's lease), its users, and whether it still
    admits new ones."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    users: int = 0
    leased: bool = False
    closed: bool = False
    released: asyncio.Event = field(default_factory=asyncio.Event)
    sending: dict[str, asyncio.Future[Any]] = field(default_factory=dict)  # id -> its send


class SeqAllocator:
    """Numbers and orders exchanges per session; one instance per process."""

    def __init__(
        self,
        redis: Redis,
        *,
        ttl_s: int,
        lease_s: float,
        prefix: str = PREFIX,
    ) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.lease_ms = int(lease_s * 1000)
        self.prefix = prefix
        self._local: dict[str, _Local] = {}
        self._acquire = redis.register_script(_ACQUIRE)
        self._allocate = redis.register_script(_ALLOCATE)
        self._confirm = redis.register_script(_CONFIRM)
        self._release = redis.register_script(_RELEASE)

    def keys(self, namespace: str, session_id: str) -> list[str]:
        """ids, meta, lease, want and turns keys of a session (one hash slot with its
        segmenter state)."""
        k = session_key(namespace, session_id)
        parts = ("ids", "meta", "lease", "want", "turns")
        return [gateway_key(k, part, self.prefix) for part in parts]

    @contextlib.asynccontextmanager
    async def session(
        self, namespace: str, session_id: str, deadline: float
    ) -> AsyncIterator[SessionSeqs]:
        """Use of one session until every send made inside is acked (or given up on).

        `deadline` (event-loop time) bounds the wait for another process's lease.
        """
        key = session_key(namespace, session_id)
        loop = asyncio.get_running_loop()
        while (local := self._local.get(key)) is not None and local.closed:
            try:  # another process wants the session: let this holding drain
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    await local.released.wait()
            except TimeoutError as exc:
                raise SessionBusy("the session is busy; try again shortly") from exc
        if local is None:
            local = self._local[key] = _Local()
        local.users += 1
        try:
            yield SessionSeqs(self, namespace, session_id, local, deadline)
        finally:
            local.users -= 1
            if local.users == 0:
                # forgotten before the release: a new user starts a new holding (new token)
                # that waits for this release instead of sharing a lease about to go
                if self._local.get(key) is local:
                    del self._local[key]
                if local.leased:
                    with contextlib.suppress(Exception):  # else it expires after lease_s
                        lease_key = self.keys(namespace, session_id)[2]
                        await self._release(keys=[lease_key], args=[local.token])
                local.released.set()

    async def _lease(self, lease_key: str, local: _Local, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        keys = [lease_key, lease_key.removesuffix(":lease") + ":want"]
        delay = 0.002
        while True:
            if await self._acquire(keys=keys, args=[local.token, self.lease_ms, WANT_MS]):
                local.leased = True
                return
            if loop.time() + delay > deadline:
                raise SessionBusy("another producer holds the session; try again shortly")
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)


class SessionSeqs:
    """One caller's handle on a session; see `SeqAllocator.session`."""

    def __init__(
        self,
        allocator: SeqAllocator,
        namespace: str,
        session_id: str,
        local: _Local,
        deadline: float,
    ) -> None:
        self.allocator = allocator
        self.namespace = namespace
        self.session_id = session_id
        self._local = local
        self._deadline = deadline
        keys = allocator.keys(namespace, session_id)
        self._ids, self._meta, self._lease_key, self._want, self._turns = keys
        key = session_key(namespace, session_id)
        self._state = segmenter_state_key(key, allocator.prefix)
        self._forgotten = seq_floor_key(key, allocator.prefix)

    @contextlib.asynccontextmanager
    async def ordered(self) -> AsyncIterator[None]:
        """The section whose order is the partition's: allocate, then enqueue the sends."""
        timeout = self._deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                await self._local.lock.acquire()
        except TimeoutError as exc:
            raise SessionBusy("the session is busy with other requests; try again") from exc
        try:
            if not self._local.leased:
                await self.allocator._lease(self._lease_key, self._local, self._deadline)
            yield
        finally:
            self._local.lock.release()

    async def allocate(self, wanted: Sequence[Wanted]) -> list[Allocation]:
        """Seqs for `wanted`, in order (call inside `ordered`); raises SeqRejected, writing
        nothing, when one cannot be accepted."""
        _, allocations = await self._run(wanted)
        return allocations

    async def last(self) -> int:
        """The highest seq allocated, acked or applied in the session (-1: none yet)."""
        last, _ = await self._run([])
        return last

    async def _run(self, wanted: Sequence[Wanted]) -> tuple[int, list[Allocation]]:
        a = self.allocator
        args: list[str | int] = [self._local.token, a.lease_ms, a.ttl_s]
        for w in wanted:
            turns = orjson.dumps([list(t) for t in w.turns]).decode()  # [] when none is named
            args += [w.exchange_id, -1 if w.seq is None else w.seq, w.digest, turns]
        keys = [
            self._ids,
            self._meta,
            self._lease_key,
            self._state,
            self._want,
            self._turns,
            self._forgotten,
        ]
        for _ in range(2):
            reply = await a._allocate(keys=keys, args=args)
            status = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if status != "lease":
                break
            self._local.leased = False  # expired under a stall: take it again, then retry
            await a._lease(self._lease_key, self._local, self._deadline)
        if status != "ok":
            if status == "lease":
                raise SessionBusy("lost the session's lease twice; try again")
            if status == "turn":
                raise SeqRejected(int(reply[1]) - 1, status, -1, turn=int(reply[2]))
            raise SeqRejected(int(reply[1]) - 1, status, int(reply[2]))
        if reply[3]:
            self._local.closed = True  # another process waits: admit no one new, then release
        out = []
        for w, (seq, dup, part, off) in zip(wanted, reply[2], strict=True):
            out.append(
                Allocation(w.exchange_id, int(seq), bool(dup), int(part), int(off))
                if dup
                else Allocation(w.exchange_id, int(seq), False)
            )
        return int(reply[1]), out

    async def send_once(
        self, exchange_id: str, send: Callable[[], Awaitable[asyncio.Future[Any]]]
    ) -> tuple[asyncio.Future[Any], bool]:
        """The send of `exchange_id` (call inside `ordered`): made by `send`, or, when another
        request of this process sent it and is still waiting for its ack, that one's (True:
        this request re-sent it, and is answered as a duplicate). Concurrent re-sends of an
        id are otherwise all given its seq before the first confirms it, each produced (the
        segmenter drops all but one as replays, but every caller was told it wrote it). A
        send that failed is made again."""
        other = self._local.sending.get(exchange_id)
        if other is not None and not (other.done() and (other.cancelled() or other.exception())):
            return other, True
        sent = self._local.sending[exchange_id] = await send()
        return sent, False

    async def confirm(self, acks: Sequence[Ack]) -> int:
        """Record acked sends; returns the session's accepted watermark."""
        if not acks:
            return -1
        a = self.allocator
        args: list[str | int] = [a.ttl_s, self.session_id]
        for ack in acks:
            args += [ack.exchange_id, ack.seq, ack.partition, ack.offset, ack.digest]
        keys = [self._ids, self._meta, accepted_key(self.namespace, a.prefix)]
        confirmed = int(await a._confirm(keys=keys, args=args))
        for ack in acks:  # a re-send from now on reads it as acked
            self._local.sending.pop(ack.exchange_id, None)
        return confirmed
