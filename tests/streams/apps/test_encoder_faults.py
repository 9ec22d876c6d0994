"""The encoder stage through an LLM outage: 503s, then 429s with Retry-After, then 401s, then
valid replies (DESIGN §6.3). Time is compressed here; `lychee bench llm-outage` runs the
same scenario with 90 s of 503s."""

from __future__ import annotations

import pytest

from streams.bench.llm_faults import VALID_REPLY, format_report, run_llm_faults
from tests.fakes.openai_server import FakeOpenAI, status, valid

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
            [(8.0, status(503, {})), (4.0, status(429, {"Retry-After": "1"})),
             (8.0, status(401, {}))],
            segments=5,
            worker_env=FAST,
            timeout_s=300,
        )  # fmt: skip
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
    assert refused and all(p["level"] == "error" and "LYCHEE_LLM_API_KEY" in p["hint"]
                           for p in refused), text  # fmt: skip
    assert len(report.paused_lines) <= 20 / 2 + 3, text
    waits = [b["paused_s"] - a["paused_s"] for a, b in zip(report.paused_lines, report.paused_lines[1:], strict=False)
             if b["paused_s"] > a["paused_s"]]  # fmt: skip
    assert waits and min(waits) >= 1.9, text
    assert report.resumed_lines >= 1, text
