"""What `lychee status` reports: lag per stage, dead letters, rows."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from schemas import topics as t
from streams import metrics
from streams.client import construction_usage
from streams.factories import open_store
from streams.lag import STAGE_INPUTS, LagReader
from streams.settings import Settings
from streams.topics import DLQ_SOURCES


async def collect(settings: Settings) -> dict[str, Any]:
    async with LagReader(settings.kafka_bootstrap) as reader:
        stages = [await reader.stage(s) for s in STAGE_INPUTS]
        dead = {}
        for src in DLQ_SOURCES:
            ends = await reader.end_offsets(t.dlq(src))
            dead[t.dlq(src)] = sum(ends.values())
    store = await asyncio.to_thread(open_store, settings)
    rows = {
        name: await asyncio.to_thread(store.count, name) for name in ("turns", "records", "nodes")
    }
    usage = await construction_usage(settings)
    endpoints = await metrics_endpoints(settings)
    return {
        "stages": [
            {
                "stage": x.stage,
                "group": x.group,
                "topic": x.topic,
                "end": x.end,
                "committed": x.committed,
                "lag": x.lag,
            }  # fmt: skip
            for x in stages
        ],
        "dead_letters": dead,
        "rows": rows,
        "construction_tokens": usage,
        "metrics_endpoints": endpoints,
    }


async def metrics_endpoints(settings: Settings) -> list[dict[str, Any]]:
    """Every process's live /metrics endpoint, as each registered it in Redis."""
    redis = Redis.from_url(settings.redis_url, socket_timeout=10)
    try:
        return await metrics.endpoints(redis)
    finally:
        await redis.aclose()
