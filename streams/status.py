"""What `lychee status` reports: the workers of `lychee up`, lag per stage, dead letters, rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from schemas import topics as t
from streams import metrics
from streams.client import construction_usage
from streams.factories import open_store
from streams.kafka.lag import STAGE_INPUTS, LagReader
from streams.kafka.topics import DLQ_SOURCES
from streams.settings import Settings
from streams.stack.endpoints import read_endpoints
from streams.stack.lock import pid_alive
from streams.stack.supervisor import read_supervision
from workers.store import ALL_TABLES


def launcher_dir(settings: Settings) -> Path | None:
    """The data directory of the running `lychee up` these settings point at, if any."""
    endpoints = read_endpoints()
    if endpoints is None or endpoints.kafka_bootstrap != settings.kafka.bootstrap:
        return None
    return Path(endpoints.data_dir)


def supervision(data_dir: Path | None) -> dict[str, Any] | None:
    """Restarts and failed stages as the launcher last wrote them, and whether it still runs."""
    report = read_supervision(data_dir) if data_dir else None
    if report is not None:
        report["launcher_alive"] = bool(report.get("pid")) and pid_alive(int(report["pid"]))
    return report


async def collect(settings: Settings, data_dir: Path | None = None) -> dict[str, Any]:
    async with LagReader(settings.kafka.bootstrap) as reader:
        stages = [await reader.stage(s) for s in STAGE_INPUTS]
        dead = {}
        for src in DLQ_SOURCES:
            ends = await reader.end_offsets(t.dlq(src))
            dead[t.dlq(src)] = sum(ends.values())
    store = await asyncio.to_thread(open_store, settings)
    rows = {name: await asyncio.to_thread(store.count, name) for name in ALL_TABLES}
    usage = await construction_usage(settings)
    endpoints = await metrics_endpoints(settings)
    return {
        "pauses": await pauses(endpoints),
        "supervision": supervision(data_dir),
        "stages": [
            {
                "stage": x.stage,
                "group": x.group,
                "topic": x.topic,
                "end": x.end,
                "committed": x.committed,
                "lag": x.lag,
            }
            for x in stages
        ],
        "dead_letters": dead,
        "rows": rows,
        "construction_tokens": usage,
        "metrics_endpoints": endpoints,
    }


async def pauses(endpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pauses the live workers are in, read from their /metrics: which stage, why
    (transient or systemic, the error's type) and for how long."""
    import time

    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    async def scrape(client: httpx.AsyncClient, ep: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            text = (await client.get(ep["url"])).text
        except httpx.HTTPError:
            return []  # gone since it registered: its TTL will drop it
        now = time.time()
        return [
            {**sample.labels, "pid": ep["pid"], "paused_s": round(now - sample.value, 1)}
            for family in text_string_to_metric_families(text)
            if family.name == "lychee_stage_paused_since_seconds"
            for sample in family.samples
        ]

    async with httpx.AsyncClient(timeout=3.0) as client:
        found = await asyncio.gather(*(scrape(client, ep) for ep in endpoints))
    return [p for per_endpoint in found for p in per_endpoint]


async def metrics_endpoints(settings: Settings) -> list[dict[str, Any]]:
    """Every process's live /metrics endpoint, as each registered it in Redis."""
    redis = Redis.from_url(settings.redis.url, socket_timeout=10)
    try:
        return await metrics.endpoints(redis)
    finally:
        await redis.aclose()
