"""Answer generation from the selected evidence (DESIGN §8.5, paper App. E.3).

One chat completion reads the two evidence blocks of `serialize_context` and the question,
and replies with a short answer phrase. Unlike the planner there is no fallback: a failed
call raises `AnswerUnavailable` with its reason, and the query service turns that into an
error note on the reply.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from schemas.records import TokenUsage
from workers.encoder.llm import EncoderError, is_retryable, retry_after_s
from workers.encoder.prompts import prompt_tokens
from workers.tokens import count_tokens

Sleep = Callable[[float], Awaitable[None]]

# --- the prompt ------------------------------------------------------------------------

ANSWER_SYSTEM_PROMPT = """\
You answer questions about people using memories of their conversations.

# CONTEXT

The memories come from a conversation, usually between two speakers, and carry dates. \
They arrive in two blocks:
1. Episodic/Semantic Memories: short, fact-like statements and summaries distilled from \
the conversation.
2. Raw Memories: verbatim snippets of the conversation itself.

Reading rules:
1. The two blocks can repeat each other. Count a fact, event or item once, however many \
memories mention it; do not double count.
2. Read both blocks and keep only what actually helps with the question.
3. Within each block, memories are ordered by relevance, most relevant first.
4. When the question names a person, answer about that person only. Never put a fact \
about the other speaker in its place.
5. In Raw Memories, a name prefix in the text (for example "Ana:" or "Bruno:") tells who \
is speaking; use it to resolve "I", "me" and "my".
6. `Date:` on an Episodic/Semantic memory is the resolved date of the event or fact it \
states.
7. `Mentioned:` on a Raw Memory is the date of the conversation in which the snippet was \
said, which is not necessarily when the event happened.

# INSTRUCTIONS

1. Read every memory before answering.
2. Pay attention to dates whenever time matters.
3. For a question about a specific event or fact, look for direct, explicit evidence.
4. For a question asking for advice, a recommendation or a preferred kind of response, \
first find the named person's preferences, habits, constraints and past actions, and base \
the suggestion mainly on them.
5. If memories contradict each other, the most recent one wins.
6. Turn relative time references ("yesterday", "last week", "two years ago") into \
concrete dates, counted from the date of the memory that contains them.
7. Do not confuse when something was said (`Mentioned:`) with when it happened (`Date:`).
8. Do not reply that there is no information when related memories can reasonably \
support an answer. Abstain only when there is truly no relevant evidence.
9. Prefer the exact words, or a short phrase, from the memories.
10. Answer in at most 5-6 words. Add an explanation only when the answer would otherwise \
be ambiguous.

# APPROACH (think it through silently)

1. Decide whether the question asks for a fact or for advice or a preference.
2. Gather every memory clearly related to the question.
3. Check dates and content to find the most reliable evidence.
4. For a fact, find the explicit mention that answers it; for advice, ground the answer \
in facts about the person.
5. Do any date arithmetic internally and state the result as a concrete date or time span.
6. Output only the answer phrase: no preamble, no label, no reasoning."""


def build_answer_messages(
    question: str, context: str, time_basis: str = ""
) -> list[dict[str, str]]:
    """[system, user]: the answer rules; then the optional time basis (e.g. today's date),
    the evidence blocks as `serialize_context` writes them, the question and `Answer:`."""
    parts = [time_basis.strip()] if time_basis.strip() else []
    parts += [context.strip(), f"Question: {question.strip()}", "Answer:"]
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# --- the answerer ----------------------------------------------------------------------


class AnswerUnavailable(EncoderError):
    """No usable answer: the server refused the request, kept failing through the bounded
    retries, or replied with nothing. `usage` is what the failed attempt still spent."""

    def __init__(
        self,
        reason: str,
        *,
        retry_after_s: float | None = None,
        usage: TokenUsage | None = None,
    ) -> None:
        super().__init__(f"answer unavailable: {reason}")
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.usage = usage or TokenUsage()


class LLMAnswerer:
    """One chat completion per question (temperature 0, free text), retried only on
    `is_retryable` errors with full-jitter backoff that honours Retry-After.

    A Retry-After longer than `max_delay_s` ends the attempts at once: the question's
    client is waiting, and an error note is better than a long sleep.
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        *,
        max_attempts: int = 3,
        timeout_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        base_delay_s: float = 0.25,
        max_delay_s: float = 4.0,
        rng: random.Random | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.model = model
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._sleep = sleep
        self._rng = rng
        self.name = f"llm:{model}"

    async def answer(
        self, question: str, context: str, *, time_basis: str = ""
    ) -> tuple[str, TokenUsage]:
        """The stripped answer phrase and the usage of the call; AnswerUnavailable when no
        answer came back, ValueError for a blank question."""
        if not question.strip():
            raise ValueError("the question is blank")
        messages = build_answer_messages(question, context, time_basis)
        completion = await self._complete(messages, self._rng or random.Random(question))
        usage = _usage(completion, messages)
        answer = _content(completion).strip()
        if not answer:
            raise AnswerUnavailable("the answer model replied with an empty message", usage=usage)
        return answer, usage

    async def _complete(self, messages: list[dict[str, str]], rng: random.Random) -> ChatCompletion:
        # The same loop as LLMPlanner._complete / LLMEncoder._complete: neither exposes it as a
        # shared helper, so it is kept small here; the retry rule itself (`is_retryable`,
        # `retry_after_s`) is the encoder's.
        for attempt in range(1, self.max_attempts + 1):
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await self.client.chat.completions.create(
                        model=self.model,
                        messages=cast("list[ChatCompletionMessageParam]", messages),
                        temperature=0,
                        timeout=self.timeout_s,
                    )
            except (openai.OpenAIError, TimeoutError) as exc:
                what = _describe(exc)
                hint = retry_after_s(exc)
                if not is_retryable(exc):
                    raise AnswerUnavailable(f"the LLM server refused the request: {what}") from exc
                if attempt == self.max_attempts or (hint or 0.0) > self.max_delay_s:
                    raise AnswerUnavailable(
                        f"LLM unavailable after {attempt} attempt(s): {what}", retry_after_s=hint
                    ) from exc
                ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
                await self._sleep(max(rng.uniform(0, ceiling), hint or 0.0))
        raise AssertionError("unreachable")  # the loop returns or raises


def _content(completion: ChatCompletion) -> str:
    if not completion.choices:
        return ""
    return completion.choices[0].message.content or ""


def _usage(completion: ChatCompletion, messages: list[dict[str, str]]) -> TokenUsage:
    """Real counts from the server, estimated only when it sends no `usage`."""
    prompt = prompt_tokens(messages)
    if completion.usage is not None:
        return TokenUsage(
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
            prompt_tokens=prompt,
            calls=1,
        )
    return TokenUsage(
        input_tokens=prompt,
        output_tokens=count_tokens(_content(completion)),
        estimated=True,
        prompt_tokens=prompt,
        calls=1,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timed out"
    return type(exc).__name__
