"""The encoder stage through an LLM outage: 503s, then 429s with Retry-After, then 401s, then
valid replies (DESIGN §6.3). Time is compressed here; `lychee bench llm-outage` runs the
same scenario with 90 s of 503s."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from schemas import Segment
from schemas import topics as t
from streams import dlq
from streams.bench.llm_faults import VALID_REPLY, format_report, run_llm_faults, segment
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.kafka.topics import ensure_topics
from streams.stack.embedded import Stack
from tests.fakes.openai_server import FakeOpenAI, status, valid
from tests.waiting import eventually, wait_until

pytestmark = pytest.mark.integration

FAST = {
    "LYCHEE_LLM_MAX_ATTEMPTS": "2",
    "LYCHEE_LLM_TIMEOUT_S": "5",
    "LYCHEE_TRANSIENT_MAX_WAIT_S": "1",
    "LYCHEE_PAUSE_LOG_INTERVAL_S": "2",
}


def test_encoder_outage_then_401_pauses_resumes_and_encodes_each_segment_once() -> None:
    with FakeOpenAI(default_reply=valid(VALID_REPLY)) as server:
        report = run_llm_faults(
            server,
            [
                (8.0, status(503, {})),
                (4.0, status(429, {"Retry-After": "1"})),
                (8.0, status(401, {})),
            ],
            segments=5,
            worker_env=FAST,
            timeout_s=300,
        )
    text = format_report(report)
    assert report.worker_alive, text
    assert report.dead_letters == 0, text
    assert len(report.batches_per_segment) == 5, text
    assert set(report.batches_per_segment.values()) == {1}, text  # once each, no second set
    assert report.endpoint_completions == 5, text  # one successful call per segment
    assert report.counted_calls == report.counted_segments == 5, text
    assert report.counted_input_tokens == report.endpoint_input_tokens > 0, text
    assert report.endpoint_requests > report.endpoint_completions + 10, text  # it did retry
    # paused, said so at the configured cadence (not once per retry), then resumed
    refused = [p for p in report.paused_lines if "401" in str(p.get("error"))]
    assert refused and all(
        p["level"] == "error" and "LYCHEE_LLM_API_KEY" in p["hint"] for p in refused
    ), text
    assert len(report.paused_lines) <= 20 / 2 + 3, text
    waits = [
        b["paused_s"] - a["paused_s"]
        for a, b in zip(report.paused_lines, report.paused_lines[1:], strict=False)
        if b["paused_s"] > a["paused_s"]
    ]
    assert waits and min(waits) >= 1.9, text
    assert report.resumed_lines >= 1, text


# -- a failure of our code or of a library: pause, never drain the input into dead letters ----

BROKEN_ENCODER = """
from workers.encoder import encoders

async def broken(self, segment, reference_context):
    raise AttributeError("'NoneType' object has no attribute 'split' (a library that does not fit)")

encoders.ExtractiveEncoder.encode = broken
"""


def test_encoder_programming_error_pauses_without_dead_letters_then_a_mended_worker_encodes_each_segment_once(
    tmp_path: Path,
) -> None:
    """A broken library fails every tenant's segments: the second namespace confirms that the
    error is ours, and the stage pauses. At most the first segment is dead-lettered (judged
    alone, it might have been one tenant's input); it stays replayable."""
    shim = tmp_path / "shim"  # imported at start-up by the first worker only: its encoder breaks
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BROKEN_ENCODER)
    stack = Stack(tmp_path / "stack")
    env = {
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "LYCHEE_LOG_FORMAT": "json",
        "LYCHEE_LOG_LEVEL": "INFO",
        "LYCHEE_TRANSIENT_MAX_WAIT_S": "1",
        "LYCHEE_PAUSE_LOG_INTERVAL_S": "2",
    }
    try:
        stack.start_infra()
        asyncio.run(ensure_topics(stack.bootstrap, 4))
        broken = stack.start_worker("encoder", {**env, "PYTHONPATH": str(shim)})
        run = uuid.uuid4().hex[:6]
        namespaces = [f"systemic-a-{run}", f"systemic-b-{run}"]
        segs = [segment(namespaces[i % 2], i) for i in range(5)]  # the tenants alternate
        asyncio.run(send_segments(stack.bootstrap, segs))
        paused = wait_for_event(broken.log_path, "stage.paused", broken, 240)
        assert paused["kind"] == "systemic" and "AttributeError" in paused["error"]
        assert "not the message's fault" in paused["hint"]
        shown = asyncio.run(status_pauses(stack.settings()))
        assert [(p["stage"], p["kind"], p["error_type"]) for p in shown] == [
            ("encoder", "systemic", "AttributeError")
        ]
        letters = asyncio.run(dlq.read(stack.settings(), [t.SEGMENTS]))
        assert len(letters) <= 1, [x.as_dict() for x in letters]
        for letter in letters:  # judged alone: one tenant's, until the second confirmed it
            reason = letter.headers["error"]
            assert "AttributeError" in reason and "all of namespace" in reason
        for ns in namespaces:
            assert asyncio.run(read_topic(stack.bootstrap, t.RECORDS, key=ns)) == []
        broken.kill()  # mended: the worker restarted without the broken library
        broken.proc.wait(10)  # type: ignore[union-attr]
        mended = stack.start_worker("encoder", env)
        encoded = asyncio.run(wait_encoded(stack.bootstrap, namespaces, mended, 300))
        lettered = {json.loads(x.value or b"{}").get("segment_id") for x in letters}
        missing = {s.segment_id for s in segs} - set(encoded)
        assert missing <= lettered, missing  # only a dead-lettered segment may be missing
        replay = asyncio.run(dlq.replay(stack.settings(), t.SEGMENTS, dry_run=bool(not missing)))
        assert len(replay.replayed) == len(letters), replay  # the letter stays replayable
        encoded = asyncio.run(wait_encoded(stack.bootstrap, namespaces, mended, 300, len(segs)))
        assert encoded == Counter({s.segment_id: 1 for s in segs})
    finally:
        stack.stop()


async def wait_encoded(
    bootstrap: str, namespaces: list[str], worker: Any, timeout_s: float, n: int = 0
) -> Counter[str]:
    """How many record batches each segment of `namespaces` has, once `n` segments have
    theirs and the encoder has committed all its input (it commits a segment after publishing
    its records, so a late duplicate would be in the topic by then)."""

    async def encoded() -> Counter[str]:
        assert worker.alive, "the encoder exited"
        out: Counter[str] = Counter()
        for ns in namespaces:
            batches = await read_topic(bootstrap, t.RECORDS, key=ns)
            out.update(json.loads(v)["segment_id"] for _, v, _ in batches if v)
        return out

    await eventually(
        encoded,
        what=f"records of {n} segments",
        until=lambda done: len(done) >= n,
        timeout_s=timeout_s,
        interval_s=1.0,
    )
    async with LagReader(bootstrap) as lag:
        await lag.wait_drained(("encoder",), timeout_s=timeout_s)
    return await encoded()


async def send_segments(bootstrap: str, segs: list[Segment]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for s in segs:
            key = f"{s.namespace}/{s.session_id}".encode()
            await producer.send_and_wait(t.SEGMENTS, s.model_dump_json().encode(), key=key)
    finally:
        await producer.stop()


def wait_for_event(log: Path, event: str, worker: Any, timeout_s: float) -> dict[str, Any]:
    def logged() -> dict[str, Any] | None:
        for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
            if f'"{event}"' in line:
                return dict(json.loads(line[line.find("{") :]))
        assert worker.alive, f"the worker exited; see {log}"
        return None

    found = wait_until(logged, what=f"{event} in {log}", timeout_s=timeout_s, interval_s=0.5)
    assert found is not None
    return found


async def status_pauses(settings: Any) -> list[dict[str, Any]]:
    from streams.status import metrics_endpoints, pauses

    async def shown() -> list[dict[str, Any]]:
        return await pauses(await metrics_endpoints(settings))

    found: list[dict[str, Any]] = await eventually(
        shown, what="a pause reported by the worker's /metrics", timeout_s=60, interval_s=1
    )
    return found
