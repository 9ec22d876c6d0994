"""Where the indexer last wrote each namespace: per table, the version its write left.

The query service keeps small namespaces in memory (`workers.store.snapshots`). A LanceDB
version is the whole table's, so a write to one namespace would make every other
namespace's snapshot be read again, with its full-text indexes: under a steady ingest of
other conversations, nearly every question. The indexer records here, after each durable
write and before its offsets are committed, the version of each searched table it wrote,
per namespace it wrote (or for all of them: a forget, retention); the query service reads
its namespace's marks once a request and keeps a snapshot while it is at least that new.

A mark only rises (a redelivered write may record an older version). Without a mark (a
namespace last written before the marks existed), or when Redis cannot be read, a request
compares its snapshots with the table's version as before: never a staler answer.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from streams.progress import PREFIX
from workers.forget import RAISE_FIELDS
from workers.store.snapshots import EVERY, Written

log = structlog.get_logger("lychee.written")
PAUSE_S = 5.0  # after a failed read, requests check versions without asking Redis this long


def versions_key(namespace: str, prefix: str = PREFIX) -> str:
    """Keyed by a digest, as the fences are: after a forget no Redis key may name its
    namespace."""
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:32]
    return f"{prefix}:idx:versions:{digest}"


def every_namespace_key(prefix: str = PREFIX) -> str:
    """Marks of writes that reach every namespace (a forget, retention)."""
    return f"{prefix}:idx:versions:all"


class WrittenVersions:
    def __init__(self, redis: Redis, prefix: str = PREFIX) -> None:
        self.redis = redis
        self.prefix = prefix
        self._raise = redis.register_script(RAISE_FIELDS)
        self._paused_until = 0.0

    async def record(self, namespaces: Iterable[str] | None, versions: Mapping[str, int]) -> None:
        """Raise the marks of `namespaces` (None: every namespace) to `versions` (table ->
        version), read after the write was committed."""
        if not versions:
            return
        args = [0, *(x for table, version in versions.items() for x in (table, version))]
        if namespaces is None:
            keys = [every_namespace_key(self.prefix)]
        else:
            keys = [versions_key(ns, self.prefix) for ns in sorted(set(namespaces))]
        for key in keys:
            await self._raise(keys=[key], args=args)

    async def of(self, namespace: str, tables: Sequence[str]) -> Written | None:
        """The namespace's marks of `tables`, keyed (table, namespace) as snapshot reads take
        them, and (table, EVERY) for the writes that reached every namespace; None when
        Redis cannot be read (the reads then check versions), and for PAUSE_S after, so
        that an outage does not hold every request for a timeout."""
        if time.monotonic() < self._paused_until:
            return None
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hmget(versions_key(namespace, self.prefix), list(tables))
                pipe.hmget(every_namespace_key(self.prefix), list(tables))
                own, every = await pipe.execute()
        except RedisError as exc:
            self._paused_until = time.monotonic() + PAUSE_S
            log.warning("written_versions.unread", namespace=namespace, error=repr(exc))
            return None
        marks = {}
        for table, mine, all_ in zip(tables, own, every, strict=True):
            if all_ is not None:
                marks[(table, EVERY)] = int(all_)
            if mine is not None:  # a namespace never marked keeps the version checks
                marks[(table, namespace)] = max(int(mine), int(all_ or 0))
        return marks
