"""The answer generator (DESIGN §8.5): the prompt, and the LLM answerer through the real
`openai` client against the scripted loopback fake."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import openai
import pytest

from schemas import EvidenceItem
from tests.fakes.openai_server import FakeOpenAI, Reply, slow, status, text
from tests.workers.conftest import Sleeps
from workers.encoder.errors import EncoderError
from workers.llm.policy import RetryPolicy
from workers.query.answer import (
    ANSWER_SYSTEM_PROMPT,
    LLMAnswerer,
    build_answer_messages,
)
from workers.query.errors import AnswerUnavailable
from workers.query.serialize import serialize_context

MODEL = "fake-answerer"
QUESTION = "When did Ana move to Lisbon?"


def evidence_context() -> str:
    items = [
        EvidenceItem(
            kind="record",
            item_id="r1",
            text="Ana moved to Lisbon for a new job.",
            turn_ids=["s1/t3"],
            session_id="s1",
            resolved_date="2024-03-02",
        ),
        EvidenceItem(
            kind="turn",
            item_id="s1/t3",
            text="Ana: I finally moved to Lisbon last week!",
            turn_ids=["s1/t3"],
            session_id="s1",
            speaker="Ana",
            date=datetime(2024, 3, 9, 18, 30),
        ),
    ]
    context, _ = serialize_context(items)
    return context


def answerer(client: openai.AsyncOpenAI, sleeps: Sleeps | None = None, **kw: Any) -> LLMAnswerer:
    json_mode = kw.pop("json_mode", None)
    policy = LLMAnswerer.policy.with_(**kw)
    return LLMAnswerer(client, MODEL, policy=policy, json_mode=json_mode, sleep=sleeps or Sleeps())


# --- the prompt ------------------------------------------------------------------------


def test_answer_prompt_states_the_paper_rules() -> None:
    for rule in (
        "Episodic/Semantic Memories",
        "Raw Memories",
        "double count",
        "that person only",
        "speaking",
        "`Date:`",
        "`Mentioned:`",
        "most recent one wins",
        "concrete dates",
        "truly no relevant evidence",
        "exact words",
        "5-6 words",
        "Output only the answer phrase",
        "[replaced on <date> by a later statement]",
        "[current since <date>; replaces an earlier statement]",
        "[it had replaced an earlier statement]",
        "[contradicted by another statement; nothing later settles it]",
        "it was X, now Y",
    ):
        assert rule in ANSWER_SYSTEM_PROMPT, rule


def test_answer_messages_put_context_then_question_then_answer_cue() -> None:
    context = evidence_context()

    system, user = build_answer_messages(f"  {QUESTION}\n", context)

    assert system == {"role": "system", "content": ANSWER_SYSTEM_PROMPT}
    assert user["role"] == "user"
    body = user["content"]
    assert body.startswith("Episodic/Semantic Memories:")
    assert context in body
    assert body.endswith(f"\n\nQuestion: {QUESTION}\n\nAnswer:")
    assert body.index("Raw Memories:") < body.index("Question:")


def test_answer_messages_lead_with_the_time_basis_only_when_given() -> None:
    context = evidence_context()

    (_, with_basis) = build_answer_messages(QUESTION, context, " Today is 1 April 2024. ")
    (_, without) = build_answer_messages(QUESTION, context, "   ")

    assert with_basis["content"].startswith("Today is 1 April 2024.\n\nEpisodic/Semantic")
    assert without["content"].startswith("Episodic/Semantic Memories:")


# --- the LLM answerer ------------------------------------------------------------------


async def test_answer_returns_stripped_reply_with_temperature_zero_and_usage(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("  2 March 2024 \n"))
    context = evidence_context()

    answer, usage = await answerer(client).answer(QUESTION, context)

    assert answer == "2 March 2024"
    (body,) = server.requests
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert "response_format" not in body  # free text, not JSON mode
    system, user = body["messages"]
    assert system == {"role": "system", "content": ANSWER_SYSTEM_PROMPT}
    assert "Mentioned" in system["content"]
    assert "Episodic/Semantic Memories:" in user["content"]
    assert "Raw Memories:" in user["content"]
    assert "- Ana moved to Lisbon for a new job. (Date: 2 March 2024)" in user["content"]
    assert "[Mentioned: 9 March 2024] Ana: I finally moved" in user["content"]
    assert f"Question: {QUESTION}" in user["content"]
    assert user["content"].endswith("Answer:")

    (served,) = server.usages
    assert usage.input_tokens == served["prompt_tokens"]
    assert usage.output_tokens == served["completion_tokens"]
    assert usage.calls == 1 and not usage.estimated and usage.prompt_tokens > 0


async def test_answer_sends_the_time_basis(server: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    server.script(text("Lisbon"))

    await answerer(client).answer(QUESTION, evidence_context(), time_basis="Today is 1 May 2024.")

    (body,) = server.requests
    assert body["messages"][1]["content"].startswith("Today is 1 May 2024.")


async def test_answer_server_error_then_success_retries_once(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(500, headers={}), text("Lisbon"))
    sleeps = Sleeps()

    answer, usage = await answerer(client, sleeps, base_delay_s=0.25).answer(
        QUESTION, evidence_context()
    )

    assert answer == "Lisbon"
    assert len(server.requests) == 2
    (delay,) = sleeps.delays
    assert 0.0 <= delay <= 0.25  # full jitter under the first ceiling
    assert usage.calls == 1  # the failed attempt returned no completion to count


async def test_answer_retries_honour_retry_after(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(429, {"Retry-After": "2"}), text("Lisbon"))
    sleeps = Sleeps()

    answer, _ = await answerer(client, sleeps).answer(QUESTION, evidence_context())

    assert answer == "Lisbon"
    assert sleeps.delays == [2.0]


async def test_answer_server_errors_on_every_attempt_raise_answer_unavailable(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(*[status(500, headers={})] * 3)
    sleeps = Sleeps()

    with pytest.raises(AnswerUnavailable) as caught:
        await answerer(client, sleeps, max_attempts=3).answer(QUESTION, evidence_context())

    assert not isinstance(caught.value, EncoderError)  # never caught by encoder handlers
    assert "3 attempt(s)" in caught.value.reason and "HTTP 500" in caught.value.reason
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert caught.value.usage.calls == 0
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2  # between attempts, never after the last one


async def test_answer_client_error_is_not_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(400, headers={}))
    sleeps = Sleeps()

    with pytest.raises(AnswerUnavailable, match="refused the request: HTTP 400"):
        await answerer(client, sleeps).answer(QUESTION, evidence_context())

    assert len(server.requests) == 1 and sleeps.delays == []


async def test_answer_long_retry_after_gives_up_at_once(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(503, {"Retry-After": "120"}))
    sleeps = Sleeps()

    with pytest.raises(AnswerUnavailable) as caught:
        await answerer(client, sleeps).answer(QUESTION, evidence_context())

    assert caught.value.retry_after_s == 120.0
    assert len(server.requests) == 1 and sleeps.delays == []


async def test_answer_attempt_past_its_deadline_is_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(slow(2.0, text("too late")), text("Lisbon"))
    sleeps = Sleeps()

    answer, _ = await answerer(client, sleeps, first_token_s=0.3).answer(
        QUESTION, evidence_context()
    )

    assert answer == "Lisbon"
    assert len(server.requests) == 2 and len(sleeps.delays) == 1


async def test_answer_empty_reply_raises_with_the_spent_usage(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(Reply("  \n"))

    with pytest.raises(AnswerUnavailable, match="empty") as caught:
        await answerer(client).answer(QUESTION, evidence_context())

    assert caught.value.usage.calls == 1
    assert caught.value.usage.input_tokens == server.usages[0]["prompt_tokens"]


async def test_answer_cut_at_its_token_cap_is_no_answer(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    class Capped(LLMAnswerer):
        max_output_tokens = 5

    server.script(text("Let me think about every memory in turn before I answer this"))
    with pytest.raises(AnswerUnavailable, match="cut at its cap of 5 tokens"):
        await Capped(client, MODEL, sleep=Sleeps()).answer(QUESTION, evidence_context())


async def test_answer_prompt_too_large_for_the_window_is_not_sent(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.context_tokens = 1024
    with pytest.raises(AnswerUnavailable, match="context window of 1024 tokens"):
        await answerer(client).answer(QUESTION, evidence_context() + " padding" * 2000)
    assert server.requests == []


async def test_answer_blank_question_is_rejected_without_a_call(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(ValueError, match="blank"):
        await answerer(client).answer("  ", evidence_context())
    assert server.requests == []


def test_retry_policy_needs_at_least_one_attempt() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
