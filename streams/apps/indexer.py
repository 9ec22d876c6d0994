"""Indexer worker: `memory.turns` and `memory.records` -> LanceDB, commit after each write."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import RawTurn
from schemas import topics as t
from schemas.records import RecordBatch
from streams.apps.base import make_app, raw_topic, stage_outputs
from streams.factories import make_embedder, open_store
from streams.guard import Incoming, TransientPolicy, run_guarded
from streams.progress import Progress
from streams.serde import SCHEMA, SerdeError, decode
from streams.settings import Settings
from workers.indexer.service import IndexBatch, IndexerService
from workers.store import EvidenceStore

log = structlog.get_logger("lychee.indexer")


def turn_parser(store: EvidenceStore, max_bytes: int) -> Callable[[Incoming], RawTurn]:
    def parse(rec: Incoming) -> RawTurn:
        turn = decode(rec.value, RawTurn, max_bytes)
        if turn.embedding_model != store.model or len(turn.embedding) != store.dim:
            # the store refuses it too, but only after failing the whole batch first
            raise SerdeError(
                f"invalid RawTurn: embedding is {turn.embedding_model[:60]!r} "
                f"({len(turn.embedding)}-d); the store holds {store.model!r} ({store.dim}-d)",
                SCHEMA,
            )
        return turn

    return parse


def build(settings: Settings) -> faust.App:
    app = make_app("indexer", settings, fetch_wait_ms=settings.stage_fetch_wait_ms)
    _, dead = stage_outputs(app, "indexer", settings)
    policy = TransientPolicy.from_settings(settings)
    store = open_store(settings)
    service = IndexerService(store)
    redis = Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=10)
    progress = Progress(redis)

    parse_turn = turn_parser(store, settings.max_message_bytes)

    async def write_turns(turns: Sequence[RawTurn]) -> None:
        await service.write(IndexBatch(turns=list(turns)))
        await progress.record_indexed(turns)  # per-session watermark: what is searchable

    async def write_records(batches: Sequence[RecordBatch]) -> None:
        await service.write(IndexBatch(records=list(batches)))

    @app.agent(raw_topic(app, t.TURNS), concurrency=1)
    async def index_turns(stream: faust.StreamT[bytes]) -> None:
        log.info("indexer.ready", lancedb=settings.lancedb_uri)
        async for events in stream.take_events(
            settings.indexer_batch_size, settings.indexer_batch_wait_s
        ):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded("indexer", records, parse_turn, write_turns, dead, policy=policy)

    @app.agent(raw_topic(app, t.RECORDS), concurrency=1)
    async def index_records(stream: faust.StreamT[bytes]) -> None:
        if service.embedder is None:  # nodes and records are embedded here, once
            service.embedder = await asyncio.to_thread(make_embedder, settings)
        async for events in stream.take_events(64, settings.indexer_batch_wait_s):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded("indexer", records,
                              lambda r: decode(r.value, RecordBatch, settings.max_message_bytes),
                              write_records, dead, policy=policy)  # fmt: skip

    @app.timer(settings.optimize_interval_s)
    async def optimize() -> None:
        try:
            report = await service.optimize(settings.ann_min_rows, settings.optimize_budget_s)
            if report.built:
                log.info("ann.built", tables=report.built)
            if report.deferred:
                log.info(
                    "optimize.deferred", tables=report.deferred, budget_s=settings.optimize_budget_s
                )
        except Exception as exc:  # noqa: BLE001 - next tick retries
            log.error("optimize.failed", error=repr(exc))

    return app
