"""Faust app factory: one app (consumer group) per stage, raw bytes in and out."""

from __future__ import annotations

import faust

from streams.settings import Settings


def make_app(stage: str, settings: Settings) -> faust.App:
    brokers = ";".join(f"kafka://{b.strip()}" for b in settings.kafka_bootstrap.split(","))
    return faust.App(
        f"lychee-{stage}",
        broker=brokers,
        key_serializer="raw",
        value_serializer="raw",
        store="memory://",
        web_enabled=False,
        autodiscover=False,
        topic_allow_declare=False,  # topics are pre-created with fixed partition counts
        topic_disable_leader=True,
        topic_partitions=settings.topic_partitions,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=1.0,
        broker_commit_every=1000,
        stream_buffer_maxsize=4096,
        worker_redirect_stdouts=False,
        producer_acks=-1,
    )


def raw_topic(app: faust.App, name: str) -> faust.TopicT:
    return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
