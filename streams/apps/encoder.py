"""Encoder worker: `memory.segments` -> `memory.records`, one encoder call per segment."""

from __future__ import annotations

from collections.abc import Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import Segment
from schemas import topics as t
from streams import metrics
from streams.apps.base import make_app, raw_topic, stage_outputs
from streams.factories import make_llm_client
from streams.guard import Incoming, TransientPolicy, run_guarded
from streams.serde import decode
from streams.settings import Settings
from workers.encoder.service import EncoderService, SegmentEncoder

log = structlog.get_logger("lychee.encoder")


def make_encoder(settings: Settings) -> SegmentEncoder:
    from workers.encoder.adapters import ExtractiveEncoder, GuardedLLMEncoder
    from workers.encoder.llm import LLMEncoder

    llm = make_llm_client(settings)
    if llm is None:
        return ExtractiveEncoder()
    client, model = llm
    policy = LLMEncoder.policy.with_(
        max_attempts=settings.llm_max_attempts, timeout_s=settings.llm_timeout_s
    )
    return GuardedLLMEncoder(LLMEncoder(client, model, policy=policy, sleep=metrics.retry_sleep()))


def build(settings: Settings) -> faust.App:
    app = make_app("encoder", settings, fetch_wait_ms=settings.stage_fetch_wait_ms)
    publisher, dead = stage_outputs(app, "encoder", settings)
    policy = TransientPolicy.from_settings(settings)
    redis = Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=10)
    service = EncoderService(
        redis,
        make_encoder(settings),
        publisher,
        cache_ttl_s=settings.encoder_cache_ttl_s,
        cross_context=settings.encoder_cross_context,
        lease_s=settings.encoder_lease_s,
    )

    async def handle(segments: Sequence[Segment]) -> None:
        await service.handle(segments)

    @app.agent(raw_topic(app, t.SEGMENTS), concurrency=1)  # one session's segments in order
    async def encode(stream: faust.StreamT[bytes]) -> None:
        log.info("encoder.ready", encoder=service.encoder.name)
        async for events in stream.take_events(settings.encoder_batch_size, 0.2):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded("encoder", records,
                              lambda r: decode(r.value, Segment, settings.max_message_bytes),
                              handle, dead, policy=policy)  # fmt: skip

    return app
