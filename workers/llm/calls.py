"""Chat completions against any OpenAI-compatible server, shared by the encoder, the planner
and the answerer.

One bounded retry loop (`complete`, under the rule of `workers.llm.policy`) over streamed
attempts timed out on silence (`workers.llm.stream`), stepping down the structured-output
ladder (`workers.llm.formats`) when an endpoint refuses a format. `complete` raises
`CompletionError` for a call that produced no completion; each caller maps it onto its own
errors. Clients come from `make_client` with `max_retries=0`, so that this loop is the only
retry rule in play.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam
from opentelemetry.trace import SpanKind

from workers import telemetry
from workers.llm.budget import ContextBudget
from workers.llm.completion import Completion
from workers.llm.errors import CompletionError, ContextOverflow, StreamCut, StreamTimeout
from workers.llm.formats import (
    FORMATS,
    Format,
    FormatSupport,
    JsonSchema,
    format_refused,
    option_refused,
    response_format,
)
from workers.llm.observer import Attempt, CallObserver, NoObserver, failure_reason
from workers.llm.policy import RetryPolicy, Sleep, describe, is_retryable, retry_after_s
from workers.llm.stream import read_stream
from workers.llm.window import WINDOWS, ContextWindows
from workers.telemetry import AttributeValue


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    """A client without its own retries (ours are the only ones); local servers need no key.
    `timeout_s` is only the HTTP library's backstop: `RetryPolicy` bounds each attempt."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )


@dataclass(frozen=True)
class Wanted:
    """What a call asks the server for: JSON or free text, the reply's schema if any, and
    at most `max_tokens` of output (a looping model stops there, `finish_reason` "length")."""

    json: bool
    schema: JsonSchema | None = None
    name: str = "reply"
    max_tokens: int | None = None


async def complete(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[dict[str, str]],
    *,
    json_mode: bool,
    policy: RetryPolicy,
    sleep: Sleep,
    rng: random.Random,
    observer: CallObserver | None = None,
    schema: JsonSchema | None = None,
    schema_name: str = "reply",
    formats: FormatSupport = FORMATS,
    max_tokens: int | None = None,
) -> Completion:
    """One streamed completion at temperature 0 of at most `max_tokens`, retried on
    `is_retryable` errors under `policy`, but for a reply still being written at the total
    limit (`CompletionError.overlong`). With `json_mode` it asks for `schema` as
    `json_schema` (or `json_object` without one), stepping down the format ladder when the
    endpoint refuses a format.

    Backoff is full jitter (`uniform(0, min(max_delay_s, base_delay_s * 2**n))`), never less
    than the server's Retry-After, nor than `settle_s` after a timeout. A
    Retry-After longer than `max_delay_s` ends the attempts at once. Raises
    CompletionError when no completion came back.
    """
    observer = observer or NoObserver()
    wanted = Wanted(json_mode, schema, schema_name, max_tokens)
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return await _attempt(client, model, messages, wanted, policy, observer, formats)
        except (openai.OpenAIError, TimeoutError, StreamCut) as exc:
            partial = getattr(exc, "partial", None)
            rate = partial.tokens_per_s if isinstance(partial, Completion) else None
            if isinstance(exc, StreamTimeout) and exc.limit == "total" and exc.partial.chunks:
                raise CompletionError(
                    f"the reply was still being written at the total limit: {exc}",
                    error=exc,
                    retryable_exhausted=False,
                    tokens_per_s=rate,
                    overlong=True,
                ) from exc
            if not is_retryable(exc):
                raise CompletionError(
                    f"the LLM server refused the request: {describe(exc)}",
                    error=exc,
                    retryable_exhausted=False,
                ) from exc
            hint = retry_after_s(exc)
            if attempt == policy.max_attempts or (hint or 0.0) > policy.max_delay_s:
                raise CompletionError(
                    f"LLM at {client.base_url} unavailable after {attempt} attempt(s): "
                    f"{describe(exc)}",
                    error=exc,
                    retryable_exhausted=True,
                    retry_after_s=hint,
                    tokens_per_s=rate,
                ) from exc
            ceiling = min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1))
            # we closed a live generation: give the server time to notice and stop it
            floor = policy.settle_s if isinstance(exc, TimeoutError) else 0.0
            observer.retry(model)
            await sleep(max(rng.uniform(0, ceiling), hint or 0.0, floor))
    raise AssertionError("unreachable")  # the loop returns or raises (max_attempts >= 1)


async def _attempt(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[dict[str, str]],
    wanted: Wanted,
    policy: RetryPolicy,
    observer: CallObserver,
    formats: FormatSupport,
) -> Completion:
    """One attempt, asked again one rung down each time the endpoint refuses the format,
    and without an optional parameter it refuses (a few times at most: a refusal is an
    answer, not a failure worth a retry)."""
    endpoint = (str(client.base_url), model)
    first = Format.json_schema if wanted.schema is not None else Format.json_object
    fmt = formats.start(endpoint, first) if wanted.json else Format.prompt_only
    while True:
        t0 = time.perf_counter()
        optional: dict[str, Any] = {
            "stream_options": {"include_usage": True},
            "max_completion_tokens": wanted.max_tokens,
        }
        opened = client.chat.completions.create(
            model=model,
            messages=cast("list[ChatCompletionMessageParam]", messages),
            temperature=0,
            response_format=cast(Any, response_format(fmt, wanted.name, wanted.schema))
            or openai.omit,
            stream=True,
            timeout=policy.total_s,
            **{k: v for k, v in optional.items() if v is not None and formats.takes(endpoint, k)},
        )
        try:
            completion = await read_stream(opened, policy.limits)
        except (openai.OpenAIError, TimeoutError, StreamCut) as exc:
            partial = getattr(exc, "partial", None)
            observer.attempt(model, Attempt(time.perf_counter() - t0, failure_reason(exc), partial))
            if (option := option_refused(exc)) and formats.takes(endpoint, option):
                formats.refused_option(endpoint, option, exc)
            elif fmt is not Format.prompt_only and format_refused(exc):
                fmt = formats.refused(endpoint, fmt, exc)
            else:
                raise
            continue
        observer.attempt(model, Attempt(time.perf_counter() - t0, None, completion))
        return completion


class ChatCaller:
    """A model behind a client, called through `complete` with its retry policy: the common
    base of LLMEncoder, LLMPlanner, LLMAnswerer and LLMJudge. Each subclass states its default
    `policy` as a class attribute. `tokens_per_s` is the speed of its latest reply.

    Every call fits the model's context window (`context_budget`): the window its server
    states (`windows`), else `context_tokens`; a reply's cap shrinks to what the prompt
    leaves, and a prompt that leaves too little is not sent."""

    policy = RetryPolicy()
    json_mode = True
    max_output_tokens: int | None = None  # a reply's cap, where a caller states none per call

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        *,
        policy: RetryPolicy | None = None,
        json_mode: bool | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        observer: CallObserver | None = None,
        formats: FormatSupport = FORMATS,
        context_tokens: int | None = None,
        windows: ContextWindows = WINDOWS,
    ) -> None:
        if policy is not None:
            self.policy = policy
        if json_mode is not None:
            self.json_mode = json_mode
        self.client = client
        self.model = model
        self._sleep = sleep
        self._rng = rng
        self._observer = observer
        self._formats = formats
        self._context_tokens = context_tokens
        self._windows = windows
        self.tokens_per_s: float | None = None
        self.name = f"llm:{model}"

    async def _call(
        self,
        messages: list[dict[str, str]],
        rng: random.Random,
        schema: JsonSchema | None = None,
        schema_name: str = "reply",
        *,
        json_mode: bool | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """`complete` with this caller's settings (`json_mode` and `max_tokens` override its
        own), the reply's cap cut to what the context window leaves; raises CompletionError,
        its `tokens_per_s` filled from the latest reply when the failed attempts wrote
        nothing (and its `error` a ContextOverflow for a prompt that was not sent)."""
        cap = max_tokens or self.max_output_tokens
        budget = await self.context_budget()
        if budget is not None:
            try:
                cap = budget.reply_cap(messages, cap)
            except ContextOverflow as exc:
                raise CompletionError(
                    str(exc), error=exc, retryable_exhausted=False, tokens_per_s=self.tokens_per_s
                ) from exc
        with telemetry.span(
            f"chat {self.model}", kind=SpanKind.CLIENT, attributes=self._request_attributes(cap)
        ) as span:
            try:
                completion = await complete(
                    self.client,
                    self.model,
                    messages,
                    json_mode=self.json_mode if json_mode is None else json_mode,
                    policy=self.policy,
                    sleep=self._sleep,
                    rng=rng,
                    observer=self._observer,
                    schema=schema,
                    schema_name=schema_name,
                    formats=self._formats,
                    max_tokens=cap,
                )
            except CompletionError as err:
                err.tokens_per_s = err.tokens_per_s or self.tokens_per_s
                telemetry.set_attributes(span, {"error.type": type(err.error).__name__})
                raise
            telemetry.set_attributes(span, response_attributes(completion))
        self.tokens_per_s = completion.tokens_per_s or self.tokens_per_s
        return completion

    def _request_attributes(self, max_tokens: int | None) -> dict[str, AttributeValue]:
        """The call as the GenAI semantic conventions name it."""
        url = self.client.base_url
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",  # the API spoken, whatever server answers it
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": self.model,
            "gen_ai.request.temperature": 0.0,
            "server.address": url.host,
            "lychee.llm.caller": type(self).__name__,
        }
        if url.port is not None:
            attrs["server.port"] = url.port
        if max_tokens is not None:
            attrs["gen_ai.request.max_tokens"] = max_tokens
        return attrs

    async def context_budget(self) -> ContextBudget | None:
        """How prompts and replies share the model's window; None when neither the server
        nor the settings state one."""
        window = await self._windows.of(self.client, self.model, self._context_tokens)
        return None if window is None else ContextBudget(window)


def response_attributes(completion: Completion) -> dict[str, AttributeValue]:
    """What came back, as the GenAI semantic conventions name it (time to first chunk in s)."""
    attrs: dict[str, AttributeValue] = {}
    if completion.prompt_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = completion.prompt_tokens
    if completion.completion_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = completion.completion_tokens
    if completion.finish_reason is not None:
        attrs["gen_ai.response.finish_reasons"] = [completion.finish_reason]
    if completion.first_token_s is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = round(completion.first_token_s, 6)
    return attrs
