"""The encoder stage: finalized segments in, one `RecordBatch` per segment out.

Order of operations per segment (at-least-once without double work downstream):
1. a cached batch for the segment id is reused as is (a redelivered segment yields the
   same records and is not counted twice);
2. otherwise take the segment's lease in Redis (SET NX with an expiry, renewed while the
   encoder runs). A worker that finds it taken (its partitions moved while the former owner
   is still inside an LLM call) waits for the holder's batch instead of calling the LLM too,
   and takes over only when the lease expires (the holder died);
3. read the session's reference context, encode, and in ONE atomic step, only if no batch is
   stored yet, store the batch, advance the reference context and add the token counts; a
   batch stored meanwhile wins and is the one published, so a segment is counted once and
   every publication of it carries the same records. That step runs in a transaction
   watching the forget fences (workers.forget): a segment below a fence is dropped, and a
   forget landing mid-encode leaves no cache or context key behind;
4. publish the batches and wait for the broker; only then may input offsets be committed.
Segments of one session arrive in order on one partition and are handled one at a time,
so the reference context always reflects the segments before the current one.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Sequence
from typing import Protocol

import structlog
from redis.asyncio import Redis
from redis.exceptions import WatchError

from schemas import Segment, session_key
from schemas import topics as t
from schemas.records import RecordBatch, TokenUsage
from workers import telemetry
from workers.encoder.encoded import EncodedSegment, record_batch
from workers.encoder.reference import ReferenceContext
from workers.forget import (
    Fences,
    Source,
    delete_matching,
    exchange_sources,
    fence_key,
    glob_escape,
    segment_lineage,
)
from workers.ports import OutMessage, Publisher

log = structlog.get_logger("lychee.encoder")

# a poll's records are published together, but not held longer than this for the rest of
# the poll: a segment an LLM took minutes over is searchable without waiting for the others
PUBLISH_WITHIN_S = 1.0


class SegmentEncoder(Protocol):
    name: str

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment: ...


# Store the batch, advance the context and count the tokens, only if no batch is stored yet;
# returns the stored batch (ours, or the one that was there). KEYS: cache, context, usage.
# ARGV: batch json, ttl s, context json, estimated flag, then counter name/value pairs.
_STORE_ONCE = """
local stored = redis.call('GET', KEYS[1])
if stored then return stored end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
for i = 5, #ARGV, 2 do redis.call('HINCRBY', KEYS[3], ARGV[i], ARGV[i + 1]) end
if ARGV[4] == '1' then redis.call('HSET', KEYS[3], 'estimated', 1) end
return ARGV[1]
"""
# Extend or drop a lease only while it is still ours. KEYS: lease. ARGV: token, ms (renew).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def cache_key(segment_id: str, prefix: str = "lychee") -> str:
    """A segment's encoded batch, kept for a replay of the segment."""
    return f"{prefix}:enc:cache:{segment_id}"


def context_key(namespace: str, session_id: str, prefix: str = "lychee") -> str:
    """A session's reference context: what its earlier segments' records said."""
    return f"{prefix}:enc:ctx:{{{session_key(namespace, session_id)}}}"


async def drop_expired(redis: Redis, segment_ids: Sequence[str], prefix: str = "lychee") -> int:
    """Retention's part in Redis: the batches of the expired segments and their sessions'
    reference contexts (which summarise their records), as a forget deletes them; a session
    still written to builds its context again. Returns the number of keys deleted."""
    sessions = {tuple(s.split("/")[:2]) for s in segment_ids if s.count("/") >= 2}
    keys = [cache_key(s, prefix) for s in segment_ids]
    keys += [context_key(ns, sid, prefix) for ns, sid in sorted(sessions)]
    return await delete_matching(redis, (), keys)


class EncoderService:
    def __init__(
        self,
        redis: Redis,
        encoder: SegmentEncoder,
        publisher: Publisher,
        *,
        prefix: str = "lychee",
        cache_ttl_s: int = 7 * 24 * 3600,
        cross_context: bool = True,
        lease_s: float = 30.0,
        lease_poll_s: float = 0.25,
    ) -> None:
        self.cross_context = cross_context  # off: the paper's no-cross-context ablation
        self.redis = redis
        self.encoder = encoder
        self.publisher = publisher
        self.prefix = prefix
        self.cache_ttl_s = cache_ttl_s
        self.lease_ms = max(1, int(lease_s * 1000))
        self.lease_poll_s = lease_poll_s
        self._store_once = redis.register_script(_STORE_ONCE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        self.fences = Fences(redis, prefix)

    def _cache_key(self, segment_id: str) -> str:
        return cache_key(segment_id, self.prefix)

    def _lease_key(self, segment_id: str) -> str:
        return f"{self.prefix}:enc:lease:{segment_id}"

    def _context_key(self, namespace: str, session_id: str) -> str:
        return context_key(namespace, session_id, self.prefix)

    def usage_key(self, namespace: str) -> str:
        return usage_key(namespace, self.prefix)

    async def handle(
        self,
        segments: Sequence[Segment],
        sources: Sequence[Source | None] | None = None,
        headers: Sequence[telemetry.Headers | None] | None = None,
    ) -> list[RecordBatch]:
        """Encode and publish; what lies below a forget fence is dropped (`sources[i]` is
        the lineage header of `segments[i]`, used when its exchanges carry no positions;
        its record batch carries the lineage of the part encoded). `headers[i]` carries the
        segment's trace context: its span is a child of it, linked to its exchanges'."""
        srcs = list(sources) if sources is not None else [None] * len(segments)
        carried = list(headers) if headers is not None else [None] * len(segments)
        out: list[OutMessage] = []
        batches: list[RecordBatch] = []
        since = time.monotonic()
        for seg, header, hdrs in zip(segments, srcs, carried, strict=True):
            if out and time.monotonic() - since > PUBLISH_WITHIN_S:
                await self.publisher.publish(out)
                out, since = [], time.monotonic()
            with telemetry.consumed(
                t.SEGMENTS,
                hdrs,
                links=telemetry.links(x.trace for x in seg.exchanges),
                attributes=segment_attributes(seg),
            ) as span:
                src = segment_lineage(seg) or header  # the exchanges' own positions, when known
                live = await self._after_fences(seg, src)
                batch = await self.encode(*live) if live is not None else None
                if batch is None or live is None:
                    continue
                telemetry.set_attributes(span, {"lychee.encoder.records": len(batch.records)})
                batches.append(batch)
                lineage = (live[1].header(),) if live[1] is not None else ()
                out.append(
                    OutMessage(
                        t.RECORDS,
                        batch.key,
                        batch.model_dump_json().encode(),
                        telemetry.inject(lineage),
                    )
                )
        await self.publisher.publish(out)
        return batches

    async def _stale(self, segment: Segment, src: Source | None) -> bool:
        return (await self.fences.stale([(segment.namespace, segment.session_id, src)]))[0]

    async def forget(self, namespace: str, session_id: str | None) -> int:
        """Delete the cached batches, reference contexts and (for a namespace) the token
        counters; the fence must be raised first. Returns the number of keys deleted."""
        ns = glob_escape(namespace)
        if session_id is None:
            patterns = [f"{self.prefix}:enc:cache:{ns}/*", f"{self.prefix}:enc:ctx:{{{ns}/*"]
            return await delete_matching(self.redis, patterns, [self.usage_key(namespace)])
        sid = glob_escape(session_id)
        patterns = [f"{self.prefix}:enc:cache:{ns}/{sid}/*"]
        return await delete_matching(
            self.redis, patterns, [self._context_key(namespace, session_id)]
        )

    async def _after_fences(
        self, segment: Segment, src: Source | None
    ) -> tuple[Segment, Source | None] | None:
        """The segment without its exchanges from before a forget fence (a segment cut
        before the segmenter saw the forget can hold both), and its lineage; None when
        nothing is left."""
        if not await self._stale(segment, src):
            return segment, src
        ns, sid = segment.namespace, segment.session_id
        old = await self.fences.stale([(ns, sid, m) for m in exchange_sources(segment.exchanges)])
        kept = [x for x, o in zip(segment.exchanges, old, strict=True) if not o]
        if not kept:
            log.info("segment.forgotten", segment_id=segment.segment_id)
            return None
        turn_ids = [t for x in kept for t in x.turn_ids]
        part = segment.model_copy(
            update={
                "exchanges": kept,
                "first_turn_id": turn_ids[0],
                "last_turn_id": turn_ids[-1],
                "tokens": sum(x.tokens for x in kept),
            }
        )
        log.info(
            "segment.cut_at_fence",
            segment_id=segment.segment_id,
            kept_exchanges=len(kept),
            dropped_exchanges=len(old) - len(kept),
        )
        return part, segment_lineage(part)

    async def encode(self, segment: Segment, src: Source | None = None) -> RecordBatch | None:
        """The segment's batch: the stored one, or encoded here under the segment's lease;
        None when a forget fence was raised over it meanwhile."""
        cache_key = self._cache_key(segment.segment_id)
        lease_key = self._lease_key(segment.segment_id)
        token = secrets.token_hex(8)
        waited_since: float | None = None
        while True:
            cached = await self.redis.get(cache_key)
            if cached:
                if waited_since is not None:
                    log.info(
                        "segment.lease_waited",
                        segment_id=segment.segment_id,
                        waited_s=round(time.monotonic() - waited_since, 1),
                    )
                return RecordBatch.model_validate_json(cached)
            if await self.redis.set(lease_key, token, nx=True, px=self.lease_ms):
                break
            if waited_since is None:  # another worker is encoding it right now
                waited_since = time.monotonic()
                log.info("segment.lease_busy", segment_id=segment.segment_id)
            await asyncio.sleep(self.lease_poll_s)
        done = asyncio.Event()
        renewer = asyncio.create_task(self._keep_lease(lease_key, token, done))
        try:
            return await self._encode_and_store(segment, src)
        finally:
            done.set()  # ends the renewer at its next tick even if a cancel is swallowed
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
            try:
                await self._release(keys=[lease_key], args=[token])
            except Exception as exc:  # noqa: BLE001 - the lease expires on its own
                log.warning(
                    "segment.lease_release_failed", segment_id=segment.segment_id, error=repr(exc)
                )

    async def _keep_lease(self, lease_key: str, token: str, done: asyncio.Event) -> None:
        """Renew the lease every third of its life while the encoder runs (an LLM call under
        retries can outlast it); a failed renewal is retried at the next tick.

        It also stops when `done` is set, not only when cancelled: under load, a cancel
        alone can leave `encode` waiting after its segment is encoded until the event loop
        wakes on this loop's period, so `encode` does not rely on it."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self.lease_ms / 3000)
                return
            try:
                await self._renew(keys=[lease_key], args=[token, self.lease_ms])
            except Exception as exc:  # noqa: BLE001 - at worst another worker encodes too
                log.warning("segment.lease_renew_failed", key=lease_key, error=repr(exc))

    async def _encode_and_store(self, segment: Segment, src: Source | None) -> RecordBatch | None:
        ctx_key = self._context_key(segment.namespace, segment.session_id)
        raw_ctx = await self.redis.get(ctx_key)
        ctx = ReferenceContext.model_validate_json(raw_ctx) if raw_ctx else ReferenceContext()
        encoded = await self.encoder.encode(segment, ctx.render() if self.cross_context else "")
        batch = record_batch(segment, encoded)
        advanced = ctx.advanced(segment.index, encoded.disambiguation_context, encoded.records)
        counts = [x for name, value in _usage_counts(encoded.usage).items() for x in (name, value)]
        mine = batch.model_dump_json()
        keys = [self._cache_key(segment.segment_id), ctx_key, self.usage_key(segment.namespace)]
        args = [
            mine,
            self.cache_ttl_s,
            advanced.model_dump_json(),
            "1" if encoded.usage.estimated else "0",
            *counts,
        ]
        fences = [
            fence_key(segment.namespace, None, self.prefix),
            fence_key(segment.namespace, segment.session_id, self.prefix),
        ]
        for _ in range(8):
            try:
                async with self.redis.pipeline(transaction=True) as tx:
                    await tx.watch(*fences)
                    if await self._stale(segment, src):
                        log.info("segment.forgotten", segment_id=segment.segment_id)
                        return None
                    tx.multi()  # type: ignore[no-untyped-call]
                    await self._store_once(keys=keys, args=args, client=tx)
                    (stored,) = await tx.execute()
                break
            except WatchError:
                continue  # a forget raised a fence meanwhile: check again
        else:
            raise WatchError(f"fences of {segment.segment_id} kept changing")
        text = stored.decode() if isinstance(stored, bytes) else str(stored)
        if text != mine:  # a batch stored meanwhile (our lease had expired): publish that one
            log.warning(
                "segment.encoded_twice",
                segment_id=segment.segment_id,
                note="kept the stored batch; these tokens were not counted",
            )
            return RecordBatch.model_validate_json(text)
        log.info(
            "segment.encoded",
            segment_id=segment.segment_id,
            records=len(batch.records),
            encoder=batch.encoder,
        )
        return batch


def usage_key(namespace: str, prefix: str = "lychee") -> str:
    return f"{prefix}:usage:{namespace}"


async def read_usage(
    redis: Redis, namespace: str | None = None, prefix: str = "lychee"
) -> dict[str, dict[str, int]]:
    """The token counters of one namespace (one read), or of every namespace (a SCAN), by
    namespace; a namespace without counters is absent."""
    head = usage_key("", prefix)
    if namespace is not None:
        keys: list[str] = [usage_key(namespace, prefix)]
    else:
        keys = [_text(k) async for k in redis.scan_iter(match=usage_key("*", prefix))]
    out: dict[str, dict[str, int]] = {}
    for name in keys:
        if raw := await redis.hgetall(name):
            out[name.removeprefix(head)] = {_text(k): int(v) for k, v in raw.items()}
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _usage_counts(usage: TokenUsage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "prompt_tokens": usage.prompt_tokens,
        "calls": usage.calls,
        "segments": 1,
    }


def segment_attributes(segment: Segment) -> dict[str, telemetry.AttributeValue]:
    """What a segment's span says of it."""
    return {
        "lychee.segment.id": segment.segment_id,
        "lychee.segment.reason": segment.reason.value,
        "lychee.segment.exchanges": len(segment.exchanges),
        "lychee.segment.tokens": segment.tokens,
    }
