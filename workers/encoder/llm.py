"""The LLM segment encoder: one chat completion per segment against any OpenAI-compatible server.

Failures come out as two errors the stage can act on: `LLMUnavailable` (the server is
overloaded or unreachable: pause and retry the segment later, never drop it) and
`InvalidEncoderOutput` (the reply stayed unusable after one repair: dead-letter the
segment). The client is built with `max_retries=0` so that `is_retryable` and the
backoff below are the only retry rule in play.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import ValidationError

from schemas import Segment
from schemas.records import Temporal, TokenUsage
from workers.encoder.prompts import (
    DISAMBIGUATION_MAX_CHARS,
    EncoderReply,
    build_messages,
    prompt_tokens,
    repair_message,
)
from workers.encoder.records import EncodedSegment, build_record, segment_turns
from workers.tokens import count_tokens

Sleep = Callable[[float], Awaitable[None]]


class EncoderError(Exception):
    """Root of the encoder's errors; raised as such for requests the server refuses (4xx)."""


class LLMUnavailable(EncoderError):
    """Rate-limited, failing or unreachable after the bounded retries: retry the segment later."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InvalidEncoderOutput(EncoderError):
    """The reply is not the JSON asked for, even after the repair retry: dead-letter it."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"invalid encoder output: {reason}")
        self.raw = raw
        self.reason = reason


def is_retryable(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, server errors, timeouts and lost connections."""
    if isinstance(exc, openai.APIConnectionError | TimeoutError):  # APITimeoutError included
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def retry_after_s(exc: BaseException) -> float | None:
    """The server's wait hint (`retry-after-ms`, or `Retry-After` in seconds or as a date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(float(ms) / 1000, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    """A client without its own retries (ours are the only ones); local servers need no key."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )


class LLMEncoder:
    """Segment -> records with one completion, at most one repair, bounded transient retries.

    Backoff is full jitter (`uniform(0, min(max_delay_s, base_delay_s * 2**n))`), never less
    than the server's Retry-After. A Retry-After longer than `max_delay_s` ends the attempts
    at once: such a wait belongs to the caller's pause, not to a sleeping task.
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        *,
        max_attempts: int = 5,
        base_delay_s: float = 0.5,
        max_delay_s: float = 30.0,
        timeout_s: float = 60.0,
        json_mode: bool = True,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.model = model
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.timeout_s = timeout_s
        self.json_mode = json_mode
        self._sleep = sleep
        self._rng = rng
        self.name = f"llm:{model}"

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment:
        """Records of `segment`: LLMUnavailable means later, InvalidEncoderOutput dead-letter;
        a bare EncoderError is a request the server refuses (4xx: key, model, size)."""
        # Seeded by the segment so a redelivered segment waits the same way (and tests replay).
        rng = self._rng or random.Random(segment.segment_id)
        turns = segment_turns(segment)
        messages = build_messages(segment, reference_context)
        first_prompt = prompt_tokens(messages)
        completions = [(await self._complete(messages, rng), first_prompt)]
        raw = _content(completions[0][0])
        try:
            reply = parse_reply(raw, len(turns))
        except InvalidEncoderOutput as first:
            repair = [
                *messages,
                {"role": "assistant", "content": raw},
                repair_message(first.reason, len(turns)),
            ]
            completions.append((await self._complete(repair, rng), prompt_tokens(repair)))
            raw = _content(completions[1][0])
            reply = parse_reply(raw, len(turns))

        ids = [tid for tid, _, _ in turns]
        records = [
            build_record(
                segment,
                r.memory_type,
                r.semantic_text,
                [ids[i] for i in r.evidence_turns] or segment.turn_ids,
                entities=r.entities,
                tags=r.tags,
                temporal=Temporal(**r.temporal.model_dump()),
                source_role=r.source_role,
            )
            for r in reply.records
            if r.semantic_text.strip()
        ]
        return EncodedSegment(
            records=records,
            disambiguation_context=reply.disambiguation_context[:DISAMBIGUATION_MAX_CHARS],
            usage=_usage(completions, first_prompt),
            encoder=self.name,
        )

    async def _complete(self, messages: list[dict[str, str]], rng: random.Random) -> ChatCompletion:
        """One completion, retried on `is_retryable` with backoff; each attempt has one deadline."""
        for attempt in range(1, self.max_attempts + 1):
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await self.client.chat.completions.create(
                        model=self.model,
                        messages=cast("list[ChatCompletionMessageParam]", messages),
                        temperature=0,
                        response_format=(
                            {"type": "json_object"} if self.json_mode else openai.omit
                        ),
                        timeout=self.timeout_s,
                    )
            except (openai.OpenAIError, TimeoutError) as exc:
                if not is_retryable(exc):
                    raise EncoderError(f"the LLM server refused the request: {exc}") from exc
                hint = retry_after_s(exc)
                if attempt == self.max_attempts or (hint or 0.0) > self.max_delay_s:
                    raise LLMUnavailable(
                        f"LLM unavailable after {attempt} attempt(s): {_describe(exc)}", hint
                    ) from exc
                ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
                await self._sleep(max(rng.uniform(0, ceiling), hint or 0.0))
        raise AssertionError("unreachable")  # the loop returns or raises


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_reply(raw: str, n_turns: int) -> EncoderReply:
    """The validated reply; InvalidEncoderOutput names the problem for the repair prompt."""
    text = raw.strip()
    if m := _FENCE.match(text):
        text = m.group(1).strip()
    if not text:
        raise InvalidEncoderOutput(raw, "the reply is empty")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        # Tolerate prose around the object before paying for a repair.
        start, end = text.find("{"), text.rfind("}")
        try:
            data = json.loads(text[start : end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            data = None
        if data is None:
            raise InvalidEncoderOutput(raw, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidEncoderOutput(raw, "expected a JSON object with a 'records' list")
    try:
        return EncoderReply.model_validate(data, context={"n_turns": n_turns})
    except ValidationError as exc:
        raise InvalidEncoderOutput(raw, _explain(exc)) from exc


def _explain(exc: ValidationError) -> str:
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors()[:8]
    ]
    return "schema errors: " + "; ".join(parts)


def _content(completion: ChatCompletion) -> str:
    if not completion.choices:
        return ""
    return completion.choices[0].message.content or ""


def _usage(completions: list[tuple[ChatCompletion, int]], first_prompt_tokens: int) -> TokenUsage:
    """Summed over every completion received; estimated only where a server omitted `usage`."""
    inp = out = 0
    estimated = False
    for c, estimate in completions:
        if c.usage is not None:
            inp += c.usage.prompt_tokens
            out += c.usage.completion_tokens
        else:
            estimated = True
            inp += estimate
            out += count_tokens(_content(c))
    return TokenUsage(
        input_tokens=inp,
        output_tokens=out,
        estimated=estimated,
        prompt_tokens=first_prompt_tokens,
        calls=len(completions),
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timed out"
    return type(exc).__name__
