"""Faust app factory: one app (consumer group) per stage, raw bytes in and out."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import faust

from streams.apps.monitor import StageMonitor
from streams.kafka import fetch
from streams.kafka.guard import DeadLetters, TransientPolicy
from streams.kafka.producer import LINGER_MS, KafkaPublisher
from streams.settings import Settings
from workers.embedding import Embedder

# ONNX threads of the segmenter's and the indexer's model when `embedding.threads` is unset:
# the two embed at once on shared cores, where one thread each does more per core than one
# per core each (docs/decisions.md#the-ingest-stages-run-their-model-on-one-thread)
INGEST_MODEL_THREADS = 1
_FETCH_WAIT_MS = {"value": 1500}


async def ingest_embedder(settings: Settings) -> Embedder:
    """The segmenter's or the indexer's model, loaded off the loop, on INGEST_MODEL_THREADS
    unless `embedding.threads` says otherwise."""
    # imported here: the query worker, whose processes answer, loads no model or store
    from streams.factories import make_embedder

    return await asyncio.to_thread(make_embedder, settings, INGEST_MODEL_THREADS)


def _patch_fetch_wait() -> None:
    """Let the broker fetch wait be configured: Faust hard-codes 1500 ms.

    A broker that answers a fetch only when the wait expires (Tansu does) would add that
    wait to every request/reply round trip; the query stage sets a short one.
    """
    from faust.transport.drivers import aiokafka as driver

    cls = driver.AIOKafkaConsumerThread
    if getattr(cls, "_lychee_patched", False):
        return
    original = cls._create_worker_consumer

    def create(self, transport):  # type: ignore[no-untyped-def]
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = _FETCH_WAIT_MS["value"]  # read by start()
        return consumer

    cls._create_worker_consumer = create  # type: ignore[method-assign]
    cls._lychee_patched = True  # type: ignore[attr-defined]


def make_app(stage: str, settings: Settings, fetch_wait_ms: int = 1500) -> faust.App:
    _FETCH_WAIT_MS["value"] = fetch_wait_ms
    _patch_fetch_wait()
    fetch.install()  # an undecodable batch becomes a dead letter, not a dead fetcher
    brokers = ";".join(f"kafka://{b.strip()}" for b in settings.kafka.bootstrap.split(","))
    # Faust creates its data directory even for the memory store; not in the worker's cwd
    datadir = Path(tempfile.gettempdir()) / f"lychee-faust-{os.getuid()}" / stage
    datadir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        f"lychee-{stage}",
        broker=brokers,
        key_serializer="raw",
        value_serializer="raw",
        store="memory://",
        datadir=str(datadir),
        web_enabled=False,
        autodiscover=False,
        topic_allow_declare=False,  # topics are pre-created with fixed partition counts
        topic_disable_leader=True,
        topic_partitions=settings.kafka.topic_partitions,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=1.0,
        broker_commit_every=1000,
        stream_buffer_maxsize=4096,
        worker_redirect_stdouts=False,
        producer_acks=-1,
        broker_session_timeout=settings.kafka.session_timeout_s,
        broker_heartbeat_interval=max(0.5, settings.kafka.session_timeout_s / 10),
        # Faust stops polling while every partition waits on a paused agent (LLM down); past
        # this interval aiokafka leaves the group and never rejoins (see
        # docs/decisions.md#a-paused-stage-stays-in-its-group). Heartbeats keep running
        # meanwhile, so a dead worker is still noticed by the session timeout.
        broker_max_poll_interval=settings.kafka.max_poll_interval_s,
        monitor=StageMonitor(stage),  # messages in and consumer lag as metrics
    )


def stage_outputs(
    app: faust.App, stage: str, settings: Settings, linger_ms: int = LINGER_MS
) -> tuple[KafkaPublisher, DeadLetters]:
    """The stage's publisher and dead letters, living as long as the app.

    The publisher starts on first use and stops once, when the app shuts down (after the
    consumer has stopped and in-flight events are acked): never in an agent's `finally`,
    or an agent restarted by Faust would find it stopped.
    """
    publisher = KafkaPublisher.from_settings(settings, linger_ms)

    @app.on_before_shutdown.connect  # type: ignore[arg-type]  # mode's stub wants `signal=`
    async def _stop_publisher(sender: Any, **kwargs: Any) -> None:
        await publisher.stop()

    return publisher, DeadLetters(publisher, stage, TransientPolicy.from_settings(settings))


def raw_topic(app: faust.App, name: str) -> faust.TopicT:
    return app.topic(
        name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )


def take_events(
    stream: faust.StreamT[bytes], max_: int, within: float
) -> AsyncIterator[Sequence[faust.EventT[bytes]]]:
    """Batches of at most `max_` events, waiting at most `within` seconds for one to fill
    (Faust's `StreamT` declares `take_events` nowhere, hence the cast)."""
    return cast(
        AsyncIterator[Sequence[faust.EventT[bytes]]], cast(Any, stream).take_events(max_, within)
    )
