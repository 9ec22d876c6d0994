"""Forget fences, lineage and Redis clean-up shared by the stages (DESIGN §7).

A forget is fenced by *where the data came from*, not by when it is met: every message a
stage derives from an exchange carries that exchange's position in `memory.exchanges`
(`lychee-src: partition:offset`; a segment carries the position of its earliest exchange,
and each of its exchanges its own; a record batch carries the lineage of what it encoded).
A forget stores the end offsets of `memory.exchanges` read before it was sent, per
namespace and per session, in a fence; a message of that namespace or session from below
the fence is dropped by every stage, however late it arrives, and one from after it is
ingested normally; stored rows keep their lineage too (workers.store.lineage), so a forget
removes only what predates it. Nothing depends on the order in which stages see the
forget and the data.

The fence keys are named by a hash of the namespace (and session), so that after a
forget no Redis key names what was forgotten. They do not expire by default (`ttl_s=0`):
Tansu keeps every message whatever the topic's retention, so a consumer group reset to the
beginning would meet the forgotten exchanges again; a fence is a few bytes per partition.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from schemas import Segment, SegmentExchange

log = structlog.get_logger("lychee.forget")

SRC_HEADER = "lychee-src"
PREFIX = "lychee"

# HSET each field to its value only when higher (fences and watermarks only ever rise);
# ARGV[1] is a TTL in seconds to refresh (0: none), then field/value pairs.
RAISE_FIELDS = """
for i = 2, #ARGV, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '-1')
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
if tonumber(ARGV[1]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return 1
"""


@dataclass(frozen=True)
class Source:
    """The exchange a message derives from: partition and offset in `memory.exchanges`."""

    partition: int
    offset: int

    def header(self) -> tuple[str, bytes]:
        return (SRC_HEADER, f"{self.partition}:{self.offset}".encode())


def source_of(headers: Iterable[tuple[str, bytes]] | None) -> Source | None:
    """The `lychee-src` header of a message; None when absent or unreadable."""
    for name, value in headers or ():
        if name == SRC_HEADER:
            try:
                p, _, o = bytes(value).decode().partition(":")
                return Source(int(p), int(o))
            except (UnicodeDecodeError, ValueError):
                return None
    return None


def exchange_sources(exchanges: Iterable[SegmentExchange]) -> list[Source | None]:
    """Where each buffered exchange was read (None: unknown)."""
    return [Source(x.source.partition, x.source.offset) if x.source else None for x in exchanges]


def segment_lineage(segment: Segment) -> Source | None:
    """A segment's lineage: its earliest exchange, so that a segment holding anything from
    before a forget is dropped downstream. None when an exchange's position is unknown, or
    the exchanges come from two partitions (the topic was resized)."""
    sources = exchange_sources(segment.exchanges)
    known = [x for x in sources if x is not None]
    if len(known) < len(sources) or len({x.partition for x in known}) != 1:
        return None
    return Source(known[0].partition, min(x.offset for x in known))


def fence_key(namespace: str, session_id: str | None = None, prefix: str = PREFIX) -> str:
    digest = hashlib.sha256(f"{namespace}\x1f{session_id or ''}".encode()).hexdigest()[:32]
    return f"{prefix}:fence:{digest}"


def gateway_key(session: str, part: str, prefix: str = PREFIX) -> str:
    """One of the gateway's keys of a session (`streams.seqs`: ids, meta, lease, want,
    turns), in the hash slot of the session's segmenter state."""
    return f"{prefix}:gw:{{{session}}}:{part}"


_ID_VALUE = re.compile(r"^\d+:(-?\d+):(-?\d+):")  # seq:partition:offset:digest


def acked_at(value: str) -> tuple[int, int] | None:
    """Where the broker stored the exchange of a gateway id's value (`streams.seqs`):
    (partition, offset); None while it is in flight, or for a value the gateway does not
    write."""
    m = _ID_VALUE.match(value)
    if m is None or int(m[1]) < 0:
        return None
    return int(m[1]), int(m[2])


def seq_floor_key(session: str, prefix: str = PREFIX) -> str:
    """Where the highest seq the gateway gave a forgotten session is kept, keyed by a hash
    (no key names a forgotten namespace): exchanges it numbered before the forget may still
    be on their way, so it numbers on above them."""
    digest = hashlib.sha256(f"{session}\x1fseqs".encode()).hexdigest()[:32]
    return f"{prefix}:gw:forgotten:{digest}"


def glob_escape(name: str) -> str:
    """Names are validated (no glob characters), but a pattern must never widen by input."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in name)


class Fences:
    """The forget fences in Redis: read by every stage, raised by the first to see a forget."""

    def __init__(self, redis: Redis, prefix: str = PREFIX, ttl_s: int = 0) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._raise = redis.register_script(RAISE_FIELDS)

    async def raise_to(self, namespace: str, session_id: str | None, ends: dict[int, int]) -> None:
        args: list[str | int] = [self.ttl_s]
        for p, end in sorted(ends.items()):
            args += [f"p{p}", end]
        await self._raise(keys=[fence_key(namespace, session_id, self.prefix)], args=args)

    async def stale(self, items: Sequence[tuple[str, str | None, Source | None]]) -> list[bool]:
        """Per `(namespace, session_id, source)`: whether it was produced before a forget of
        its namespace or session. A message without a source is stale as soon as any fence
        covers it (it cannot prove it is newer)."""
        cache: dict[str, dict[str, int]] = {}

        async def fence(key: str) -> dict[str, int]:
            if key not in cache:
                raw = await self.redis.hgetall(key)
                cache[key] = {_text(k): int(v) for k, v in raw.items()}
            return cache[key]

        out = []
        for namespace, session_id, src in items:
            fns = await fence(fence_key(namespace, None, self.prefix))
            fss = await fence(fence_key(namespace, session_id, self.prefix)) if session_id else {}
            if not fns and not fss:
                out.append(False)
            elif src is None:
                out.append(True)
            else:
                f = max(fns.get(f"p{src.partition}", -1), fss.get(f"p{src.partition}", -1))
                out.append(src.offset < f)
        return out


async def delete_matching(redis: Redis, patterns: Sequence[str], exact: Sequence[str] = ()) -> int:
    """Delete every key matching one of the glob `patterns`, and the `exact` keys; returns
    how many existed."""
    removed = 0
    if exact:
        removed += int(await redis.delete(*exact))
    for pattern in patterns:
        batch: list[bytes | str] = []
        async for key in redis.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                removed += int(await redis.delete(*batch))
                batch = []
        if batch:
            removed += int(await redis.delete(*batch))
    return removed


async def rewrite_aof(redis: Redis, timeout_s: float = 60.0) -> bool:
    """Rewrite the append-only file so that deleted keys' values are no longer in it; wait
    until a rewrite started after this call is done. False when AOF is off or that rewrite
    did not finish in time.

    A rewrite already running (another stage's forget) took its snapshot before this
    stage's deletes, and Redis refuses a second one rather than queueing it, so this waits
    for it to end and then starts its own."""
    info = await redis.info("persistence")
    if not int(info.get("aof_enabled", 0)):
        return False
    deadline = time.monotonic() + timeout_s
    started = False
    while time.monotonic() < deadline:
        if not started:
            try:
                await redis.bgrewriteaof()  # started, or scheduled after an RDB save
                started = True
            except ResponseError as exc:  # an AOF rewrite is running: wait for its end
                log.info("aof.rewrite_running", note=str(exc)[:200])
        else:
            info = await redis.info("persistence")
            if not int(info.get("aof_rewrite_in_progress", 0)) and not int(
                info.get("aof_rewrite_scheduled", 0)
            ):
                return True
        await asyncio.sleep(0.05)
    log.warning("aof.rewrite_slow", timeout_s=timeout_s)
    return False


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
