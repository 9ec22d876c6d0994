"""Indexer worker: `memory.turns` and `memory.records` -> LanceDB, commit after each write."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import RawTurn
from schemas import topics as t
from schemas.records import RecordBatch
from streams.apps.base import make_app, raw_topic
from streams.factories import make_embedder, open_store
from streams.guard import DeadLetters, Incoming, run_guarded
from streams.producer import KafkaPublisher
from streams.progress import Progress
from streams.serde import decode
from streams.settings import Settings
from workers.indexer.service import IndexBatch, IndexerService

log = structlog.get_logger("lychee.indexer")


def build(settings: Settings) -> faust.App:
    app = make_app("indexer", settings, fetch_wait_ms=settings.stage_fetch_wait_ms)
    publisher = KafkaPublisher.from_settings(settings)
    dead = DeadLetters(publisher, "indexer")
    service = IndexerService(open_store(settings))
    redis = Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=10)
    progress = Progress(redis)

    async def write_turns(turns: Sequence[RawTurn]) -> None:
        await service.write(IndexBatch(turns=list(turns)))
        await progress.record_indexed(turns)  # per-session watermark: what is searchable

    async def write_records(batches: Sequence[RecordBatch]) -> None:
        await service.write(IndexBatch(records=list(batches)))

    @app.agent(raw_topic(app, t.TURNS), concurrency=1)
    async def index_turns(stream: faust.StreamT[bytes]) -> None:
        await publisher.start()
        log.info("indexer.ready", lancedb=settings.lancedb_uri)
        async for events in stream.take_events(
            settings.indexer_batch_size, settings.indexer_batch_wait_s
        ):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded(
                "indexer", records, lambda r: decode(r.value, RawTurn), write_turns, dead
            )

    @app.agent(raw_topic(app, t.RECORDS), concurrency=1)
    async def index_records(stream: faust.StreamT[bytes]) -> None:
        if service.embedder is None:  # nodes and records are embedded here, once
            service.embedder = await asyncio.to_thread(make_embedder, settings)
        await publisher.start()
        async for events in stream.take_events(64, settings.indexer_batch_wait_s):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded(
                "indexer", records, lambda r: decode(r.value, RecordBatch), write_records, dead
            )

    @app.timer(settings.optimize_interval_s)
    async def optimize() -> None:
        try:
            built = await service.optimize(settings.ann_min_rows)
            if built:
                log.info("ann.built", tables=built)
        except Exception as exc:  # noqa: BLE001 - next tick retries
            log.error("optimize.failed", error=repr(exc))

    return app
