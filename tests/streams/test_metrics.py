"""Metrics recorded at the central hooks, read back from the Prometheus registry."""

from __future__ import annotations

import asyncio
import random

import numpy as np
from faust.types import TP
from prometheus_client import REGISTRY

from streams import metrics
from streams.apps.monitor import StageMonitor
from streams.factories import make_embedder, make_llm_client
from streams.settings import Settings
from tests.fakes.openai_server import FakeOpenAI, status, text
from tests.waiting import eventually
from workers.llm.calls import complete
from workers.llm.policy import RetryPolicy


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_metrics_llm_client_counts_calls_errors_retries_tokens_and_speed() -> None:
    with FakeOpenAI() as server:
        s = Settings.load(None, llm={"base_url": server.url, "model": "fake-m"})
        llm = make_llm_client(s)
        assert llm is not None
        client, model = llm
        labels = {"stage": metrics.stage(), "model": "fake-m"}
        before = {
            "calls": value("lychee_llm_calls_total", **labels),
            "503": value("lychee_llm_errors_total", **labels, reason="http_5xx"),
            "retries": value("lychee_llm_retries_total", stage=metrics.stage()),
            "in": value("lychee_llm_tokens_total", **labels, direction="input"),
            "out": value("lychee_llm_tokens_total", **labels, direction="output"),
            "first": value("lychee_llm_first_token_seconds_count", **labels),
            "rates": value("lychee_llm_output_tokens_per_second_count", **labels),
        }
        server.script(status(503, headers={}), text("three words here"))
        policy = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01)
        await complete(
            client,
            model,
            [{"role": "user", "content": "one two"}],
            json_mode=False,
            policy=policy,
            sleep=asyncio.sleep,
            rng=random.Random(1),
            observer=metrics.LLM_OBSERVER,
        )
        assert value("lychee_llm_calls_total", **labels) - before["calls"] == 2
        assert value("lychee_llm_errors_total", **labels, reason="http_5xx") - before["503"] == 1
        assert value("lychee_llm_retries_total", stage=metrics.stage()) - before["retries"] == 1
        usage = server.usages[-1]
        got_in = value("lychee_llm_tokens_total", **labels, direction="input") - before["in"]
        got_out = value("lychee_llm_tokens_total", **labels, direction="output") - before["out"]
        assert (got_in, got_out) == (usage["prompt_tokens"], usage["completion_tokens"]) == (2, 3)
        # the streamed attempt: its time to first token and its speed (the 503 had neither)
        assert value("lychee_llm_first_token_seconds_count", **labels) - before["first"] == 1
        assert value("lychee_llm_output_tokens_per_second_count", **labels) - before["rates"] == 1
        assert value("lychee_llm_last_tokens_per_second", **labels) > 0
        await client.close()


def test_metrics_embedder_records_batch_sizes_and_latency() -> None:
    with FakeOpenAI(embedding_dim=8) as server:
        s = Settings.load(None, embedding={"provider": "openai", "base_url": server.url})
        emb = make_embedder(s)
        labels = {"stage": metrics.stage(), "model": "text-embedding-3-small"}
        count = value("lychee_embedding_batch_size_count", **labels)
        total = value("lychee_embedding_batch_size_sum", **labels)
        m = emb.embed(["a", "b", "c"])
        assert m.shape == (3, 8) and np.allclose(np.linalg.norm(m, axis=1), 1.0)
        assert value("lychee_embedding_batch_size_count", **labels) - count == 1
        assert value("lychee_embedding_batch_size_sum", **labels) - total == 3
        assert value("lychee_embedding_seconds_count", **labels) >= 1


def test_metrics_stage_monitor_lag_is_end_minus_committed() -> None:
    monitor = StageMonitor("unit-stage")
    tp = TP("memory.unit", 2)
    monitor.track_tp_end_offset(tp, 120)  # no commit seen yet: no figure rather than a wrong one
    assert (
        REGISTRY.get_sample_value(
            "lychee_consumer_lag", {"stage": "unit-stage", "topic": "memory.unit", "partition": "2"}
        )
        is None
    )
    monitor.on_tp_commit({tp: 100})
    assert (
        value("lychee_consumer_lag", stage="unit-stage", topic="memory.unit", partition="2") == 20
    )
    monitor.track_tp_end_offset(tp, 130)
    monitor.on_tp_commit({tp: 130})
    assert value("lychee_consumer_lag", stage="unit-stage", topic="memory.unit", partition="2") == 0


async def test_metrics_registration_lists_the_endpoint_until_stopped(redis, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    s = Settings.load(None, redis={"url": redis_url}, observability={"metrics_heartbeat_s": 0.2})
    ep = metrics.Endpoint("unit", "http://127.0.0.1:1/metrics", "127.0.0.1", 1)
    reg = metrics.register(s, ep)
    try:
        await eventually(lambda: metrics.endpoints(redis), what="the endpoint registered")
        assert await metrics.endpoints(redis) == [
            {"stage": "unit", "url": ep.url, "host": ep.host, "pid": 1}
        ]
    finally:
        reg.stop()
    assert await metrics.endpoints(redis) == []
