"""Topic retention is set when the topics are created (issue 12)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from schemas import topics as t
from streams.kafka.topics import all_topics, ensure_topics, topic_retention
from streams.settings import Settings
from streams.stack.embedded import Stack

pytestmark = pytest.mark.integration


async def retention_of(bootstrap: str, names: list[str]) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        res = [ConfigResource(ConfigResourceType.TOPIC, n) for n in names]
        out = {}
        for response in await admin.describe_configs(res):
            for _, _, _, name, entries in response.resources:
                out[name] = {e[0]: e[1] for e in entries}.get("retention.ms", "")
        return out
    finally:
        await admin.close()


def test_ensure_topics_sets_bounded_retention_short_for_requests(tmp_path: Path) -> None:
    settings = Settings.load(None, kafka={"topic_retention_s": 86_400, "request_retention_s": 600})
    stack = Stack(tmp_path)
    stack.start_infra()
    try:
        created = asyncio.run(ensure_topics(stack.bootstrap, 2, 1, topic_retention(settings)))
        assert sorted(created) == sorted(all_topics())
        got = asyncio.run(
            retention_of(stack.bootstrap, [t.EXCHANGES, t.RECORDS, t.CONTROL, t.REPLIES, t.QUERIES])
        )
        assert got == {
            t.EXCHANGES: "86400000",
            t.RECORDS: "86400000",
            t.CONTROL: "86400000",
            t.REPLIES: "600000",
            t.QUERIES: "600000",
        }
        assert asyncio.run(ensure_topics(stack.bootstrap, 2, 1, topic_retention(settings))) == []
    finally:
        stack.stop()
