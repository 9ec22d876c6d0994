"""Indexer worker: `memory.turns` -> LanceDB, offsets committed after each write."""

from __future__ import annotations

from collections.abc import Sequence

import faust
import structlog

from schemas import RawTurn
from schemas import topics as t
from streams.app import make_app, raw_topic
from streams.guard import DeadLetters, Incoming, run_guarded
from streams.producer import KafkaPublisher
from streams.serde import decode
from streams.settings import Settings
from workers.indexer.service import IndexBatch, IndexerService
from workers.indexer.store import EvidenceStore

log = structlog.get_logger("lychee.indexer")


def parse(rec: Incoming) -> RawTurn:
    return decode(rec.value, RawTurn)


def open_store(settings: Settings) -> EvidenceStore:
    """The store needs the embedding model's name and dimension, not the model."""
    from workers.embedding import bundled_model_info

    name, dim = bundled_model_info(settings.embedding_model_path)
    return EvidenceStore(settings.lancedb_uri, name, dim, settings.read_consistency_s)


def build(settings: Settings) -> faust.App:
    app = make_app("indexer", settings, fetch_wait_ms=settings.stage_fetch_wait_ms)
    topic = raw_topic(app, t.TURNS)
    publisher = KafkaPublisher.from_settings(settings)
    dead = DeadLetters(publisher, "indexer")
    service = IndexerService(open_store(settings))

    async def handle(turns: Sequence[RawTurn]) -> None:
        written = await service.write(IndexBatch(turns=list(turns)))
        log.debug("batch.written", **written)

    @app.agent(topic, concurrency=1)
    async def index(stream: faust.StreamT[bytes]) -> None:
        await publisher.start()
        log.info("indexer.ready", lancedb=settings.lancedb_uri)
        try:
            async for events in stream.take_events(
                settings.indexer_batch_size, settings.indexer_batch_wait_s
            ):
                await run_guarded(
                    "indexer", [Incoming.from_event(e) for e in events], parse, handle, dead
                )
        finally:
            await publisher.stop()

    @app.timer(settings.optimize_interval_s)
    async def optimize() -> None:
        try:
            await service.optimize()
        except Exception as exc:  # noqa: BLE001 - next tick retries
            log.error("optimize.failed", error=repr(exc))

    return app
