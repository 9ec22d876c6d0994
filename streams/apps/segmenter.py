"""Segmenter worker: `memory.exchanges` -> `memory.turns` + `memory.segments`."""

from __future__ import annotations

from collections.abc import Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import ContractError, ExchangeTopicMessage, ForgetRequest, parse_exchange_message
from schemas import topics as t
from streams.apps.base import ingest_embedder, make_app, raw_topic, stage_outputs, take_events
from streams.apps.control import Applied, forget_agent
from streams.kafka.guard import Incoming, TransientPolicy, retry_transient, run_guarded
from streams.kafka.serde import contract_error, decode_json
from streams.settings import Settings
from workers.segmenter.policy import Position, SegmentPolicy
from workers.segmenter.service import SegmenterService
from workers.segmenter.state_store import SessionStore
from workers.telemetry import Headers
from workers.tokens import count_tokens

log = structlog.get_logger("lychee.segmenter")


def parse(rec: Incoming, max_bytes: int | None = None) -> ExchangeTopicMessage:
    data = decode_json(rec.value, max_bytes)
    try:
        return parse_exchange_message(data)
    except ContractError as exc:
        raise contract_error(exc) from exc


def parse_positioned(
    rec: Incoming, max_bytes: int | None = None
) -> tuple[ExchangeTopicMessage, Position, Headers]:
    """The message with where it was read (the segmenter fences redeliveries by it) and its
    headers (its trace context)."""
    return parse(rec, max_bytes), Position(rec.partition, rec.offset), rec.headers


async def drain_left_behind(svc: SegmenterService, grace_s: float) -> None:
    """Outboxes nobody published (a publish failed after its commit, a process died in
    between): published at start-up and on every timer tick, without waiting for the
    session's next message."""
    try:
        await retry_transient(lambda: svc.drain_pending(grace_s), what="outbox drain")
    except Exception as exc:  # noqa: BLE001 - a timer must not die; next tick retries
        log.error("outbox.drain_failed", error=repr(exc))


def build(settings: Settings) -> faust.App:
    app = make_app("segmenter", settings, fetch_wait_ms=settings.kafka.stage_fetch_wait_ms)
    topic = raw_topic(app, t.EXCHANGES)
    publisher, dead = stage_outputs(app, "segmenter", settings)
    policy = TransientPolicy.from_settings(settings)
    holder: dict[str, SegmenterService] = {}
    control_redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)

    async def service() -> SegmenterService:
        if "svc" not in holder:
            embedder = await ingest_embedder(settings)
            p = settings.segmenter.params
            policy = SegmentPolicy(p, p.calibration_for(embedder.model_name), count_tokens)
            redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
            holder["svc"] = SegmenterService(
                SessionStore(redis),
                embedder,
                policy,
                publisher,
                ended_ttl_s=settings.segmenter.ended_session_ttl_s,
            )
            log.info("segmenter.ready", model=embedder.model_name, mode=p.mode.value)
        return holder["svc"]

    @app.agent(topic, concurrency=1)
    async def segment(stream: faust.StreamT[bytes]) -> None:
        svc = await service()
        await drain_left_behind(svc, settings.segmenter.outbox_grace_s)

        async def handle(items: Sequence[tuple[ExchangeTopicMessage, Position, Headers]]) -> None:
            result = await svc.handle(
                [m for m, _, _ in items], [p for _, p, _ in items], [h for _, _, h in items]
            )
            if result.segments or result.replays or result.redeliveries:
                log.info(
                    "batch.done",
                    size=len(items),
                    segments=result.segments,
                    replays=result.replays,
                    redeliveries=result.redeliveries,
                )

        async for events in take_events(
            stream, settings.segmenter.batch_size, settings.segmenter.batch_wait_s
        ):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded(
                "segmenter",
                records,
                lambda r: parse_positioned(r, settings.kafka.max_message_bytes),
                handle,
                dead,
                policy=policy,
            )

    async def forget(req: ForgetRequest) -> Applied:
        svc = await service()
        keys = await svc.forget(req.namespace, req.session_id, req.exchanges_end)
        return Applied(redis_keys_removed=keys)

    forget_agent(app, "segmenter", settings, publisher, dead, control_redis, forget)

    @app.timer(settings.segmenter.idle_scan_interval_s)
    async def idle_flush() -> None:
        if "svc" not in holder:
            return
        await drain_left_behind(holder["svc"], settings.segmenter.outbox_grace_s)
        try:
            closed = await retry_transient(
                lambda: holder["svc"].flush_idle(settings.segmenter.idle_timeout_s),
                what="idle flush",
            )
            if closed:
                log.info("idle.flushed", segments=closed)
        except Exception as exc:  # noqa: BLE001 - a timer must not die; next tick retries
            log.error("idle.flush_failed", error=repr(exc))

    return app
