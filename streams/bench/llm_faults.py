"""`lychee bench llm-outage`: the encoder stage against an LLM endpoint that fails for a
while (503s, then 429s with Retry-After, or 401s), then recovers.

It runs a broker, Redis and one encoder worker configured for an OpenAI-compatible
endpoint served by the caller (the scripted fake server of the tests: `server` needs
`url`, `phases(...)`, `requests` and `usages`), sends finalized segments to
`memory.segments` and reports what the stage did: whether it paused and resumed, how many
calls reached the endpoint, how many record batches came out per segment, dead letters,
the token counters against the endpoint's own usage figures, and the pause log lines.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from redis.asyncio import Redis

from schemas import FinalizeReason, Role, Segment, SegmentExchange, SegmentMode, Turn
from schemas import topics as t
from streams.kafka.reader import read_topic
from streams.kafka.topics import ensure_topics
from streams.stack.embedded import Stack
from workers.encoder.service import read_usage

VALID_REPLY = {
    "records": [
        {
            "memory_type": "fact",
            "semantic_text": "Noor keeps bees on the roof of the library.",
            "entities": ["Noor"],
            "temporal": {"t_ref": "", "t_valid_from": "", "t_valid_to": ""},
            "tags": ["bees"],
            "evidence_turns": [0],
            "source_role": "user",
        }
    ],
    "disambiguation_context": "Noor is the speaker.",
}


@dataclass
class OutageReport:
    segments: int = 0
    batches_per_segment: dict[str, int] = field(default_factory=dict)
    endpoint_requests: int = 0
    endpoint_completions: int = 0
    dead_letters: int = 0
    counted_calls: int = 0
    counted_segments: int = 0
    counted_input_tokens: int = 0
    endpoint_input_tokens: int = 0
    paused_lines: list[dict[str, Any]] = field(default_factory=list)
    resumed_lines: int = 0
    seconds_to_drain: float = 0.0
    worker_alive: bool = False


def segment(ns: str, i: int) -> Segment:
    # the words the fake model's record (VALID_REPLY) says, as a model would write them
    said = f"({i}) Noor keeps bees on the roof of the library."
    turns = [Turn(role=Role.user, speaker="Noor", content=said)]
    ex = SegmentExchange(exchange_id=f"e{i}", seq=i, turn_ids=[f"t{i}"], turns=turns, tokens=12)
    return Segment(
        segment_id=f"{ns}/s{i}/0",
        namespace=ns,
        session_id=f"s{i}",
        index=0,
        mode=SegmentMode.semantic,
        reason=FinalizeReason.session_flush,
        exchanges=[ex],
        first_turn_id=f"t{i}",
        last_turn_id=f"t{i}",
        tokens=12,
        session_date=datetime(2024, 4, 2),
    )


def encoder_env(url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "LYCHEE_LLM_BASE_URL": url,
        "LYCHEE_LLM_MODEL": "fake-model",
        "LYCHEE_LLM_API_KEY": "test-key",
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "LYCHEE_LOG_LEVEL": "INFO",
        "LYCHEE_LOG_FORMAT": "json",
        **(extra or {}),
    }


def run_llm_faults(
    server: Any,
    phases: list[tuple[float, Any]],
    segments: int = 6,
    worker_env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
) -> OutageReport:
    """Start a stack with one LLM-configured encoder, script `phases` on the server, send
    `segments` segments, wait until each has its records, and report."""
    stack = Stack(Path(tempfile.mkdtemp(prefix="lychee-llm-faults-")))
    try:
        stack.start_infra()
        asyncio.run(ensure_topics(stack.bootstrap, 4))
        worker = stack.start_worker("encoder", encoder_env(server.url, worker_env))
        return asyncio.run(_run(stack, server, phases, segments, timeout_s, worker))
    finally:
        stack.stop()
        shutil.rmtree(stack.data_dir, ignore_errors=True)


async def _run(
    stack: Stack,
    server: Any,
    phases: list[tuple[float, Any]],
    n: int,
    timeout_s: float,
    worker: Any,
) -> OutageReport:
    ns = f"llm-{uuid.uuid4().hex[:6]}"
    segs = [segment(ns, i) for i in range(n)]
    log = stack.data_dir / "logs" / "encoder.log"
    await _wait_for_line(log, "encoder.ready", worker, 180)
    requests_before, usages_before = len(server.requests), len(server.usages)
    server.phases(*phases)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    started = time.monotonic()
    try:
        for s in segs:
            await producer.send_and_wait(
                t.SEGMENTS, s.model_dump_json().encode(), key=f"{ns}/{s.session_id}".encode()
            )
    finally:
        await producer.stop()
    report = OutageReport(segments=n)
    deadline = started + timeout_s
    while True:
        batches = await read_topic(stack.bootstrap, t.RECORDS, key=ns)
        done = {json.loads(v)["segment_id"] for _, v, _ in batches if v}
        if len(done) >= n or time.monotonic() > deadline or not worker.alive:
            break
        await asyncio.sleep(1.0)
    report.seconds_to_drain = time.monotonic() - started
    await asyncio.sleep(2.0)  # a late duplicate would show up here
    for _, v, _ in await read_topic(stack.bootstrap, t.RECORDS, key=ns):
        sid = json.loads(v or b"{}").get("segment_id", "?")
        report.batches_per_segment[sid] = report.batches_per_segment.get(sid, 0) + 1
    report.dead_letters = len(await read_topic(stack.bootstrap, t.dlq(t.SEGMENTS), f"{ns}/"))
    report.endpoint_requests = len(server.requests) - requests_before
    completions = server.usages[usages_before:]
    report.endpoint_completions = len(completions)
    report.endpoint_input_tokens = sum(u["prompt_tokens"] for u in completions)
    redis = Redis.from_url(stack.redis_url)
    try:
        usage = (await read_usage(redis, ns)).get(ns, {})
    finally:
        await redis.aclose()
    report.counted_calls = usage.get("calls", 0)
    report.counted_segments = usage.get("segments", 0)
    report.counted_input_tokens = usage.get("input_tokens", 0)
    for line in log.read_text(errors="replace").splitlines():
        event = _json(line)
        if event.get("event") == "stage.paused":
            report.paused_lines.append(event)
        elif event.get("event") == "stage.resumed":
            report.resumed_lines += 1
    report.worker_alive = worker.alive
    return report


def _json(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line[line.find("{") :]) if "{" in line else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def _wait_for_line(path: Path, text: str, worker: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if not worker.alive:
            raise RuntimeError(f"the encoder worker exited; see {path}")
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the encoder worker was not ready after {timeout_s:.0f}s; see {path}")


def format_report(r: OutageReport) -> str:
    dupes = {k: v for k, v in r.batches_per_segment.items() if v != 1}
    gaps = [p.get("paused_s", 0) for p in r.paused_lines]
    return "\n".join(
        [
            f"segments sent:              {r.segments}",
            f"segments with records:      {len(r.batches_per_segment)} (more than one batch: {len(dupes)})",
            f"encoder dead letters:       {r.dead_letters}",
            f"endpoint requests:          {r.endpoint_requests} ({r.endpoint_completions} answered)",
            f"counted calls / segments:   {r.counted_calls} / {r.counted_segments}",
            f"input tokens counted:       {r.counted_input_tokens} (endpoint reported {r.endpoint_input_tokens})",
            f"pause log lines:            {len(r.paused_lines)} (paused_s: {gaps[:12]}), resumed: {r.resumed_lines}",
            f"time to drain:              {r.seconds_to_drain:.1f}s",
            f"encoder alive:              {'yes' if r.worker_alive else 'NO'}",
        ]
    )
