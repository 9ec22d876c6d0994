"""The stages a worker process can run, and how to run one (Faust is imported only then)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from streams.apps.collection import collect_as_a_worker
from streams.settings import Settings

if TYPE_CHECKING:
    import faust

STAGES = ("segmenter", "encoder", "indexer", "query")


def builder(stage: str) -> Callable[[Settings], faust.App]:
    if stage == "segmenter":
        from streams.apps.segmenter import build
    elif stage == "encoder":
        from streams.apps.encoder import build
    elif stage == "indexer":
        from streams.apps.indexer import build
    elif stage == "query":
        from streams.apps.query import build
    else:
        raise ValueError(f"unknown stage {stage!r}")
    return build


def run_worker(stage: str, settings: Settings) -> None:
    """Run one stage until SIGTERM/SIGINT; Faust drains in-flight work on the way out."""
    import faust

    from streams import metrics, tracing
    from streams.kafka.fetch import check_codecs
    from streams.kafka.topics import ensure_topics, topic_retention

    tracing.setup(stage)  # before the app is built: OTEL_* turns spans on
    collect_as_a_worker()
    check_codecs()  # refuse to start rather than crash on the first compressed batch
    asyncio.run(
        ensure_topics(
            settings.kafka.bootstrap,
            settings.kafka.topic_partitions,
            settings.kafka.topic_replication,
            topic_retention(settings),
        )
    )
    registration = metrics.serve(stage, settings)  # /metrics, listed in `lychee status`
    app = builder(stage)(settings)
    worker = faust.Worker(
        app,
        loglevel=settings.observability.log_level,
        redirect_stdouts=False,
        override_logging=False,
        quiet=True,
    )
    if not sys.stdout.isatty():  # its progress spinner writes escapes into a log file's lines
        worker.spinner = None
    try:
        worker.execute_from_commandline()
    finally:
        if registration is not None:
            registration.stop()
        tracing.shutdown()  # what the batch exporter still holds
