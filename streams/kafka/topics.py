"""Topic creation: idempotent, with configured partition counts."""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from schemas import topics as t
from streams.settings import Settings

# Every stage topic gets a dead-letter topic; requests and replies answer with errors instead.
DLQ_SOURCES = (t.EXCHANGES, t.TURNS, t.SEGMENTS, t.RECORDS, t.QUERIES, t.CONTROL)


def all_topics() -> list[str]:
    return [*t.ALL, *(t.dlq(x) for x in DLQ_SOURCES)]


def topic_retention(settings: Settings) -> dict[str, int]:
    """retention.ms per topic: bounded for data (a forgotten namespace's text stays in the
    log until it expires), short for requests and replies. Set at creation only."""
    data = int(settings.kafka.topic_retention_s * 1000)
    requests = int(settings.kafka.request_retention_s * 1000)
    return {name: requests if name in (t.QUERIES, t.REPLIES) else data for name in all_topics()}


async def ensure_topics(
    bootstrap: str,
    partitions: int,
    replication: int = 1,
    retention_ms: Mapping[str, int] | None = None,
) -> list[str]:
    """Create the missing topics (with `retention_ms` as their `retention.ms` when given);
    returns the names it created. An existing topic's configuration is left as it is."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [name for name in all_topics() if name not in existing]
        if missing:
            await admin.create_topics(
                [
                    NewTopic(
                        name,
                        partitions,
                        replication,
                        topic_configs=(
                            {"retention.ms": str(retention_ms[name])}
                            if retention_ms and name in retention_ms
                            else {}
                        ),
                    )
                    for name in missing
                ]
            )
        return missing
    finally:
        await admin.close()
