"""Topic creation: idempotent, with configured partition counts."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from schemas import topics as t

# Every stage topic gets a dead-letter topic; requests and replies answer with errors instead.
DLQ_SOURCES = (t.EXCHANGES, t.TURNS, t.SEGMENTS, t.RECORDS, t.QUERIES, t.CONTROL)


def all_topics() -> list[str]:
    return [*t.ALL, *(t.dlq(x) for x in DLQ_SOURCES)]


async def ensure_topics(bootstrap: str, partitions: int, replication: int = 1) -> list[str]:
    """Create the missing topics; returns the names it created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [name for name in all_topics() if name not in existing]
        if missing:
            await admin.create_topics([NewTopic(name, partitions, replication) for name in missing])
        return missing
    finally:
        await admin.close()
