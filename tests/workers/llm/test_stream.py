"""Streamed completions (`workers.llm.calls.complete` over `workers.llm.stream`): silence limits
instead of a total a slow model cannot meet, cut streams retried, and a retry that never
runs beside the generation it replaces. Through the real `openai` client against the
scripted loopback fake; the limits sit far from the fake's delays, and nothing asserts a
duration."""

from __future__ import annotations

import random
from typing import Any

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, pieces, slow, status, streamed, text
from tests.waiting import eventually
from tests.workers.conftest import Sleeps
from workers.llm.calls import complete
from workers.llm.completion import Completion
from workers.llm.errors import CompletionError
from workers.llm.observer import Attempt
from workers.llm.policy import RetryPolicy

MODEL = "fake-stream"
MESSAGES = [{"role": "user", "content": "tell me about Lisbon"}]
WORDS = " ".join(f"w{i}" for i in range(30))


class Heard:
    """An observer that keeps what it hears."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.retries = 0

    def attempt(self, model: str, attempt: Attempt) -> None:
        self.attempts.append(attempt)

    def retry(self, model: str) -> None:
        self.retries += 1


async def call(
    client: openai.AsyncOpenAI, sleeps: Any = None, observer: Heard | None = None, **policy: Any
) -> Completion:
    return await complete(
        client,
        MODEL,
        MESSAGES,
        json_mode=False,
        policy=RetryPolicy(**policy),
        sleep=sleeps or Sleeps(),
        rng=random.Random(0),
        observer=observer,
    )


async def settled(server: FakeOpenAI) -> None:
    """Until every generation on the fake has ended (its client gone or its reply sent)."""
    await eventually(
        lambda: [g for g in server.generations if not g.done],
        what="every generation on the fake server ended",
        until=lambda live: not live,
        interval_s=0.01,
    )


async def test_complete_streams_text_with_server_usage_and_first_token_time(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("Lisbon is on the Tagus"))
    heard = Heard()

    out = await call(client, observer=heard)

    assert out.text == "Lisbon is on the Tagus" and out.finish_reason == "stop"
    (usage,) = server.usages
    assert (out.prompt_tokens, out.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert out.chunks == len(pieces("Lisbon is on the Tagus")) == 5
    assert out.first_token_s is not None and out.first_token_s <= out.seconds
    (attempt,) = heard.attempts
    assert attempt.failure is None and attempt.completion == out
    body = server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "response_format" not in body


async def test_complete_steady_stream_longer_than_the_first_token_limit_finishes(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    # 30 chunks 0.1 s apart: about 3 s in all, past the 2 s first-token limit and far
    # within the 5 s gap limit. A total deadline of the first-token size would fail it.
    server.script(streamed(WORDS, gap_s=0.1))
    sleeps = Sleeps()

    out = await call(client, sleeps, first_token_s=2.0, gap_s=5.0, total_s=600.0)

    assert out.text == WORDS and out.chunks == 30
    assert len(server.requests) == 1 and sleeps.delays == []
    assert out.tokens_per_s is not None and out.tokens_per_s > 0


async def test_complete_no_first_token_within_its_limit_fails_naming_that_limit(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(slow(30.0, text("too late")))

    with pytest.raises(CompletionError) as info:
        await call(client, max_attempts=1, first_token_s=0.3)

    assert info.value.retryable_exhausted
    assert "time-to-first-token limit of 0.3 s passed (no token after" in info.value.reason
    await settled(server)
    assert server.generations[0].closed_by_client  # the server was told to stop


async def test_complete_silence_between_tokens_fails_on_the_gap_limit_with_the_rate(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(streamed(WORDS, stall_after=3, stall_s=30.0))
    heard = Heard()

    with pytest.raises(CompletionError) as info:
        await call(client, observer=heard, max_attempts=1, first_token_s=5.0, gap_s=0.3)

    assert "token-gap limit of 0.3 s passed (3 chunks in" in info.value.reason
    (attempt,) = heard.attempts
    assert attempt.failure == "timeout"
    assert attempt.completion is not None and attempt.completion.chunks == 3
    await settled(server)
    assert server.generations[0].closed_by_client and server.generations[0].chunks == 3


async def test_complete_reply_still_written_at_the_total_limit_is_overlong_and_not_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    # the same request at temperature 0 would write the same: a retry only costs another total
    server.script(streamed(WORDS, gap_s=0.1), text("never asked"))

    with pytest.raises(CompletionError) as info:
        await call(client, max_attempts=3, first_token_s=5.0, gap_s=5.0, total_s=0.5)

    err = info.value
    assert err.overlong and not err.retryable_exhausted
    assert "still being written at the total limit: total limit of 0.5 s passed" in err.reason
    assert err.partial.startswith("w0 w1") and len(server.requests) == 1
    await settled(server)
    assert server.generations[0].closed_by_client


async def test_complete_total_limit_before_any_token_is_retried_like_a_timeout(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(slow(30.0, text("late")), text("in time"))
    out = await call(client, max_attempts=2, first_token_s=5.0, total_s=0.5)
    assert out.text == "in time" and len(server.requests) == 2


async def test_complete_asks_for_at_most_max_tokens_and_reports_a_cut_reply(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text(WORDS))
    out = await complete(
        client,
        MODEL,
        MESSAGES,
        json_mode=False,
        policy=RetryPolicy(),
        sleep=Sleeps(),
        rng=random.Random(0),
        max_tokens=5,
    )
    assert server.requests[0]["max_completion_tokens"] == 5
    assert out.text == "w0 w1 w2 w3 w4" and out.finish_reason == "length"


@pytest.mark.parametrize("cut", ["close", "reset"])
async def test_complete_stream_cut_in_the_middle_is_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI, cut: str
) -> None:
    server.script(streamed(WORDS, cut_after=4, cut=cut), text("whole reply"))
    sleeps = Sleeps()
    heard = Heard()

    out = await call(client, sleeps, heard, max_attempts=3)

    assert out.text == "whole reply"
    assert len(server.requests) == 2 and heard.retries == 1 and len(sleeps.delays) == 1
    assert heard.attempts[0].failure == "connection"
    assert heard.attempts[0].completion is None or heard.attempts[0].completion.chunks == 4


async def test_complete_retry_after_a_timeout_never_runs_beside_the_first_generation(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    # No wait between the attempts (the sleeps are recorded, not slept): the first
    # generation must be closed before the retry reaches the server all the same.
    server.script(streamed(WORDS, stall_after=2, stall_s=30.0), text("second try"))
    sleeps = Sleeps()

    out = await call(client, sleeps, max_attempts=2, first_token_s=5.0, gap_s=0.3, settle_s=2.0)

    assert out.text == "second try" and len(server.requests) == 2
    assert sleeps.delays[0] >= 2.0  # settle_s: time for a real server to notice and stop
    assert server.max_parallel == 1
    await settled(server)
    first, second = server.generations
    assert first.closed_by_client and first.chunks == 2
    assert not second.closed_by_client


async def test_complete_error_status_of_a_streamed_request_is_not_a_stream(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(503, {}), text("after the outage"))
    out = await call(client, max_attempts=2)
    assert out.text == "after the outage" and len(server.requests) == 2
