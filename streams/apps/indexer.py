"""Indexer worker: `memory.turns` and `memory.records` -> LanceDB, commit after each write."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import faust
import structlog
from redis.asyncio import Redis

from schemas import ForgetRequest, RawTurn
from schemas import topics as t
from schemas.records import RecordBatch
from streams.apps.base import ingest_embedder, make_app, raw_topic, stage_outputs, take_events
from streams.apps.control import Applied, forget_agent
from streams.factories import open_store
from streams.kafka.errors import SerdeError
from streams.kafka.guard import Incoming, TransientPolicy, run_guarded
from streams.kafka.serde import SCHEMA, decode
from streams.progress import Progress
from streams.settings import Settings
from streams.written import WrittenVersions
from workers import telemetry
from workers.encoder.service import drop_expired
from workers.forget import Fences, Source, rewrite_aof, source_of
from workers.indexer.service import IndexBatch, IndexerService
from workers.store import EvidenceStore
from workers.store.writes import overtaken
from workers.telemetry import Consumed

log = structlog.get_logger("lychee.indexer")


def turn_parser(
    store: EvidenceStore, max_bytes: int
) -> Callable[[Incoming], tuple[RawTurn, Source | None, Consumed]]:
    def parse(rec: Incoming) -> tuple[RawTurn, Source | None, Consumed]:
        turn = decode(rec.value, RawTurn, max_bytes)
        if turn.embedding_model != store.model or len(turn.embedding) != store.dim:
            # the store refuses it too, but only after failing the whole batch first
            raise SerdeError(
                f"invalid RawTurn: embedding is {turn.embedding_model[:60]!r} "
                f"({len(turn.embedding)}-d); the store holds {store.model!r} ({store.dim}-d)",
                SCHEMA,
            )
        return turn, source_of(rec.headers), consumed(rec)

    return parse


def consumed(rec: Incoming) -> Consumed:
    """What the message's span needs: its trace context and where it was read."""
    return Consumed(rec.headers, rec.partition, rec.offset)


def parse_batch(
    max_bytes: int,
) -> Callable[[Incoming], tuple[RecordBatch, Source | None, Consumed]]:
    def parse(rec: Incoming) -> tuple[RecordBatch, Source | None, Consumed]:
        batch = decode(rec.value, RecordBatch, max_bytes)
        return batch, source_of(rec.headers), consumed(rec)

    return parse


async def with_embedder(service: IndexerService, settings: Settings) -> None:
    """The service's model, loaded (off the loop) when first needed."""
    if service.embedder is None:
        service.embedder = await ingest_embedder(settings)


def forgetter(
    service: IndexerService, progress: Progress, settings: Settings
) -> Callable[[ForgetRequest], Awaitable[Applied]]:
    async def forget(req: ForgetRequest) -> Applied:
        await with_embedder(service, settings)  # nodes that keep some links are re-embedded
        done = await service.forget(req.namespace, req.session_id, req.exchanges_end)
        keys = await progress.forget(req.namespace, req.session_id, req.exchanges_end)
        return Applied(keys, done.rows_removed, done.rows_updated, done.versions_pruned)

    return forget


async def expire(service: IndexerService, settings: Settings, redis: Redis) -> None:
    """Retention on the optimize timer: what is older than `retention_days` goes for good,
    from LanceDB and from what the encoder keeps of its segments in Redis."""
    assert settings.store.retention_days is not None
    await with_embedder(service, settings)  # nodes losing linked text are re-embedded
    expired = await service.expire(settings.store.retention_days)
    keys = await drop_expired(redis, expired.segments) if expired.segments else 0
    if keys:  # the deleted values must leave the append-only file too, as after a forget
        await rewrite_aof(redis, settings.kafka.request_timeout_s)
    if any(expired.rows_removed.values()):
        log.info(
            "retention.expired",
            rows=expired.rows_removed,
            versions_pruned=expired.versions_pruned,
            redis_keys=keys,
        )


async def maintain(service: IndexerService, settings: Settings, redis: Redis) -> None:
    """The optimize timer: retention first, then index builds and compaction within budget."""
    try:
        if settings.store.retention_days is not None:
            await expire(service, settings, redis)
        report = await service.optimize(
            settings.store.ann_min_rows, settings.store.optimize_budget_s
        )
        if report.built:
            log.info("ann.built", tables=report.built)
        if report.deferred:
            log.info(
                "optimize.deferred",
                tables=report.deferred,
                budget_s=settings.store.optimize_budget_s,
            )
    except Exception as exc:  # noqa: BLE001 - next tick retries
        if overtaken(exc):  # a write won the table: expected beside a forget
            log.warning("optimize.deferred", error=str(exc)[:300], effect="the next tick")
        else:
            log.error("optimize.failed", error=repr(exc))


def build(settings: Settings) -> faust.App:
    app = make_app("indexer", settings, fetch_wait_ms=settings.kafka.stage_fetch_wait_ms)
    publisher, dead = stage_outputs(app, "indexer", settings)
    policy = TransientPolicy.from_settings(settings)
    store = open_store(settings)
    redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
    service = IndexerService(
        store,
        fences=Fences(redis),
        node_types=settings.indexer.node_types,
        on_written=WrittenVersions(redis).record,
    )
    progress = Progress(redis)

    parse_turn = turn_parser(store, settings.kafka.max_message_bytes)

    async def write_turns(items: Sequence[tuple[RawTurn, Source | None, Consumed]]) -> None:
        batch = IndexBatch(turns=[x for x, _, _ in items], turn_sources=[s for _, s, _ in items])
        with telemetry.batch(t.TURNS, "indexer.write", [c for _, _, c in items]) as span:
            # per-session watermark: what is searchable
            await service.write(batch, on_turns=progress.record_indexed)
            telemetry.set_attributes(span, {"lychee.indexer.turns": len(items)})

    async def write_records(items: Sequence[tuple[RecordBatch, Source | None, Consumed]]) -> None:
        batch = IndexBatch(
            records=[x for x, _, _ in items], record_sources=[s for _, s, _ in items]
        )
        with telemetry.batch(t.RECORDS, "indexer.write", [c for _, _, c in items]) as span:
            await service.write(batch)
            records = sum(len(x.records) for x, _, _ in items)
            telemetry.set_attributes(span, {"lychee.indexer.records": records})

    forget_agent(
        app, "indexer", settings, publisher, dead, redis, forgetter(service, progress, settings)
    )

    @app.agent(raw_topic(app, t.TURNS), concurrency=1)
    async def index_turns(stream: faust.StreamT[bytes]) -> None:
        log.info("indexer.ready", lancedb=settings.store.uri)
        async for events in take_events(
            stream, settings.indexer.batch_size, settings.indexer.batch_wait_s
        ):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded("indexer", records, parse_turn, write_turns, dead, policy=policy)

    @app.agent(raw_topic(app, t.RECORDS), concurrency=1)
    async def index_records(stream: faust.StreamT[bytes]) -> None:
        await with_embedder(service, settings)  # nodes and records are embedded here, once
        async for events in take_events(stream, 64, settings.indexer.batch_wait_s):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded(
                "indexer",
                records,
                parse_batch(settings.kafka.max_message_bytes),
                write_records,
                dead,
                policy=policy,
            )

    @app.timer(settings.store.optimize_interval_s)
    async def optimize() -> None:
        await maintain(service, settings, redis)

    return app
