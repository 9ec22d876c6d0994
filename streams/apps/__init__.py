"""The stages a worker process can run, and how to run one (Faust is imported only then)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import TYPE_CHECKING

from streams.settings import Settings

if TYPE_CHECKING:
    import faust

STAGES = ("segmenter", "encoder", "indexer", "query")

# A worker holds tens of thousands of long-lived objects (snapshot rows, caches, the model's
# Python side) and allocates thousands of short-lived ones per message or request. With
# CPython's default thresholds (700, 10, 10) it collects every few hundred allocations and
# walks every long-lived object every few requests: a quarter of a k = 100 query's mean
# time (see docs/decisions.md#workers-collect-garbage-less-often). Garbage without cycles is
# still freed at once by reference counting.
GC_THRESHOLDS = (50_000, 20, 20)


def collect_as_a_worker() -> None:
    """This process's collector thresholds set to a worker's (`GC_THRESHOLDS`): the benches
    that time the query service in their own process call it too."""
    gc.set_threshold(*GC_THRESHOLDS)


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
    try:
        worker.execute_from_commandline()
    finally:
        if registration is not None:
            registration.stop()
        tracing.shutdown()  # what the batch exporter still holds
