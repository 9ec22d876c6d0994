"""Encoder worker: `memory.segments` -> `memory.records`, one encoder call per segment."""

from __future__ import annotations

from collections.abc import Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import ForgetRequest, Segment
from schemas import topics as t
from streams import metrics
from streams.apps.base import make_app, raw_topic, stage_outputs, take_events
from streams.apps.control import Applied, forget_agent
from streams.factories import llm_caller_options, make_llm_client, open_store
from streams.kafka.guard import Incoming, TransientPolicy, run_guarded
from streams.kafka.serde import decode
from streams.settings import Settings
from workers.encoder.service import EncoderService, SegmentEncoder
from workers.forget import Source, source_of
from workers.telemetry import Headers

log = structlog.get_logger("lychee.encoder")


def make_encoder(settings: Settings) -> SegmentEncoder:
    from workers.encoder.earlier import StoreEarlier
    from workers.encoder.encoders import ExtractiveEncoder, GuardedLLMEncoder
    from workers.encoder.llm_encoder import LLMEncoder

    llm = make_llm_client(settings)
    if llm is None:
        return ExtractiveEncoder()
    client, model = llm
    options = llm_caller_options(settings, LLMEncoder.policy, attempts=True)
    # the stored records its new ones may update, read from the store the indexer writes
    earlier = StoreEarlier(open_store(settings))
    return GuardedLLMEncoder(
        LLMEncoder(client, model, **options, observer=metrics.LLM_OBSERVER, earlier=earlier)
    )


def build(settings: Settings) -> faust.App:
    app = make_app("encoder", settings, fetch_wait_ms=settings.kafka.stage_fetch_wait_ms)
    publisher, dead = stage_outputs(app, "encoder", settings)
    policy = TransientPolicy.from_settings(settings)
    redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
    service = EncoderService(
        redis,
        make_encoder(settings),
        publisher,
        cache_ttl_s=settings.encoder.cache_ttl_s,
        cross_context=settings.encoder.cross_context,
        lease_s=settings.encoder.lease_s,
    )

    async def handle(items: Sequence[tuple[Segment, Source | None, Headers]]) -> None:
        await service.handle(
            [s for s, _, _ in items], [src for _, src, _ in items], [h for _, _, h in items]
        )

    def parse(rec: Incoming) -> tuple[Segment, Source | None, Headers]:
        segment = decode(rec.value, Segment, settings.kafka.max_message_bytes)
        return segment, source_of(rec.headers), rec.headers

    async def forget(req: ForgetRequest) -> Applied:
        await service.fences.raise_to(req.namespace, req.session_id, req.exchanges_end)
        return Applied(redis_keys_removed=await service.forget(req.namespace, req.session_id))

    forget_agent(app, "encoder", settings, publisher, dead, redis, forget)

    @app.agent(raw_topic(app, t.SEGMENTS), concurrency=1)  # one session's segments in order
    async def encode(stream: faust.StreamT[bytes]) -> None:
        log.info("encoder.ready", encoder=service.encoder.name)
        async for events in take_events(stream, settings.encoder.batch_size, 0.2):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded("encoder", records, parse, handle, dead, policy=policy)

    return app
