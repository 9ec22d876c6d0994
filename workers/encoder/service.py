"""The encoder stage: finalized segments in, one `RecordBatch` per segment out.

Order of operations per segment (at-least-once without double work downstream):
1. a cached batch for the segment id is reused as is (a redelivered segment yields the
   same records and is not counted twice);
2. otherwise read the session's reference context, encode, and in ONE Redis transaction
   store the batch in the cache, advance the reference context and add the token counts;
3. publish the batches and wait for the broker; only then may input offsets be committed.
Segments of one session arrive in order on one partition and are handled one at a time,
so the reference context always reflects the segments before the current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import structlog
from redis.asyncio import Redis
from redis.exceptions import WatchError

from schemas import Segment, session_key
from schemas import topics as t
from schemas.records import DISAMBIGUATION_MAX_CHARS, RecordBatch, TokenUsage
from workers.encoder.context import ReferenceContext
from workers.encoder.records import EncodedSegment
from workers.forget import Fences, Source, delete_matching, fence_key, glob_escape
from workers.ports import OutMessage, Publisher

log = structlog.get_logger("lychee.encoder")


class SegmentEncoder(Protocol):
    name: str

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment: ...


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
    ) -> None:
        self.cross_context = cross_context  # off: the paper's no-cross-context ablation
        self.redis = redis
        self.encoder = encoder
        self.publisher = publisher
        self.prefix = prefix
        self.cache_ttl_s = cache_ttl_s
        self.fences = Fences(redis, prefix)

    def _cache_key(self, segment_id: str) -> str:
        return f"{self.prefix}:enc:cache:{segment_id}"

    def _context_key(self, namespace: str, session_id: str) -> str:
        return f"{self.prefix}:enc:ctx:{{{session_key(namespace, session_id)}}}"

    def usage_key(self, namespace: str) -> str:
        return usage_key(namespace, self.prefix)

    async def handle(
        self, segments: Sequence[Segment], sources: Sequence[Source | None] | None = None
    ) -> list[RecordBatch]:
        """Encode and publish; a segment below a forget fence is dropped (`sources[i]` is
        the lineage of `segments[i]`, carried on to its record batch)."""
        srcs = list(sources) if sources is not None else [None] * len(segments)
        out: list[tuple[RecordBatch, Source | None]] = []
        for seg, src in zip(segments, srcs, strict=True):
            batch = await self.encode(seg, src)
            if batch is not None:
                out.append((batch, src))
        await self.publisher.publish(
            [
                OutMessage(
                    t.RECORDS,
                    session_key(b.namespace, b.session_id),
                    b.model_dump_json().encode(),
                    (src.header(),) if src is not None else (),
                )
                for b, src in out
            ]
        )
        return [b for b, _ in out]

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

    async def encode(self, segment: Segment, src: Source | None = None) -> RecordBatch | None:
        """The segment's batch; None when it lies below a forget fence (nothing is kept:
        the cache and context writes are watched against the fence)."""
        if await self._stale(segment, src):
            log.info("segment.forgotten", segment_id=segment.segment_id)
            return None
        cached = await self.redis.get(self._cache_key(segment.segment_id))
        if cached:
            return RecordBatch.model_validate_json(cached)
        ctx_key = self._context_key(segment.namespace, segment.session_id)
        raw_ctx = await self.redis.get(ctx_key)
        ctx = ReferenceContext.model_validate_json(raw_ctx) if raw_ctx else ReferenceContext()
        encoded = await self.encoder.encode(segment, ctx.render() if self.cross_context else "")
        batch = RecordBatch(
            namespace=segment.namespace,
            session_id=segment.session_id,
            segment_id=segment.segment_id,
            segment_index=segment.index,
            first_turn_id=segment.first_turn_id,
            last_turn_id=segment.last_turn_id,
            session_date=segment.session_date,
            encoder=encoded.encoder,
            records=encoded.records,
            disambiguation_context=encoded.disambiguation_context[:DISAMBIGUATION_MAX_CHARS],
            usage=encoded.usage,
        )
        advanced = ctx.advanced(segment.index, encoded.disambiguation_context, encoded.records)
        fences = [fence_key(segment.namespace, None, self.prefix),
                  fence_key(segment.namespace, segment.session_id, self.prefix)]  # fmt: skip
        for _ in range(8):
            try:
                if not await self._commit(segment, batch, ctx_key, advanced, encoded, fences, src):
                    return None
                break
            except WatchError:
                continue  # a forget raised a fence meanwhile: check again
        else:
            raise WatchError(f"fences of {segment.segment_id} kept changing")
        log.info("segment.encoded", segment_id=segment.segment_id, records=len(batch.records),
                 encoder=batch.encoder)  # fmt: skip
        return batch

    async def _commit(
        self,
        segment: Segment,
        batch: RecordBatch,
        ctx_key: str,
        advanced: ReferenceContext,
        encoded: EncodedSegment,
        fences: list[str],
        src: Source | None,
    ) -> bool:
        """Cache, context and counters in one transaction that fails if a fence moved; False
        (nothing written) when the segment is below a fence."""
        async with self.redis.pipeline(transaction=True) as tx:
            await tx.watch(*fences)
            if await self._stale(segment, src):
                return False
            tx.multi()  # type: ignore[no-untyped-call]
            tx.set(
                self._cache_key(segment.segment_id), batch.model_dump_json(), ex=self.cache_ttl_s
            )
            tx.set(ctx_key, advanced.model_dump_json())
            usage_key = self.usage_key(segment.namespace)
            for name, value in _usage_counts(encoded.usage).items():
                tx.hincrby(usage_key, name, value)
            if encoded.usage.estimated:
                tx.hset(usage_key, "estimated", 1)
            await tx.execute()
        return True


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
