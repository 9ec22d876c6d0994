"""Per-session segmenter state in Redis, with optimistic versioning and an outbox.

The state and the messages it produces are written by one Lua script, so after a
kill -9 they cannot disagree: either both the new state and its outbox entries exist
or neither does. Outbox entries are published and only then trimmed; a crash in
between republishes them, and downstream writes are idempotent on the ids inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from workers.ports import OutMessage
from workers.segmenter.policy import SessionState

_COMMIT = """
local v = redis.call('HGET', KEYS[1], 'v')
if (v or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', tostring(tonumber(ARGV[1]) + 1), 'state', ARGV[2])
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
for i = 6, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
return 1
"""


class SessionStore:
    def __init__(self, redis: Redis, prefix: str = "lychee") -> None:
        self.redis = redis
        self.prefix = prefix
        self.active_key = f"{prefix}:seg:active"
        self._commit = redis.register_script(_COMMIT)

    def _state_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:state"

    def _outbox_key(self, key: str) -> str:
        return f"{self.prefix}:seg:{{{key}}}:outbox"

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
    ) -> bool:
        """Write state and outbox atomically if nobody wrote since `version` was read."""
        entries = [orjson.dumps({"t": m.topic, "k": m.key, "v": m.value.decode()}) for m in outbox]
        score = repr(state.updated_at) if state.is_open else ""
        args: list[Any] = [version, state.model_dump_json(), key, score, ttl_s, *entries]
        keys = [self._state_key(key), self._outbox_key(key), self.active_key]
        return bool(await self._commit(keys=keys, args=args))

    async def pending(self, key: str) -> list[OutMessage]:
        raw = await self.redis.lrange(self._outbox_key(key), 0, -1)
        out = []
        for item in raw:
            d = orjson.loads(item)
            out.append(OutMessage(d["t"], d["k"], d["v"].encode()))
        return out

    async def trim(self, key: str, count: int) -> None:
        """Drop the first `count` outbox entries (published); later ones stay."""
        if count:
            await self.redis.ltrim(self._outbox_key(key), count, -1)

    async def idle_sessions(self, before: float, limit: int = 500) -> list[str]:
        raw = await self.redis.zrangebyscore(self.active_key, "-inf", before, start=0, num=limit)
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]
