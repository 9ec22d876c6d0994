"""Chat completions against any OpenAI-compatible server, shared by the encoder, the planner
and the answerer.

One retry rule (`is_retryable`, honouring the server's `retry_after_s`), one bounded retry
loop (`complete`) over streamed attempts timed out on silence (`workers.llm_stream`), the
structured-output ladder (`workers.llm_format`) and the reading of a reply (`content`,
`usage_of`). `complete` raises `CompletionError` for a call that produced no completion;
each caller maps it onto its own errors. Clients come from `make_client` with
`max_retries=0`, so that this loop is the only retry rule in play.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import openai
import orjson
from openai.types.chat import ChatCompletionMessageParam
from pydantic import ValidationError

from schemas.errors import LycheeError
from schemas.records import TokenUsage
from workers.llm_format import (
    FORMATS,
    Format,
    FormatSupport,
    JsonSchema,
    format_refused,
    option_refused,
    response_format,
)
from workers.llm_stream import Completion, StreamCut, StreamLimits, StreamTimeout, read_stream
from workers.tokens import count_tokens, prompt_tokens

Sleep = Callable[[float], Awaitable[None]]


def is_retryable(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, server errors, timeouts, lost connections and
    streams cut in the middle."""
    if isinstance(exc, openai.APIConnectionError | TimeoutError | StreamCut):
        return True  # APITimeoutError and StreamTimeout included
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


def describe(exc: BaseException) -> str:
    """A short name for a failed attempt: `HTTP 503`, `timed out (...)`, `stream cut (...)`
    or the error's type."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, StreamTimeout):
        return f"timed out: {exc}"
    if isinstance(exc, StreamCut):
        return f"stream cut: {exc}"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timed out"
    return type(exc).__name__


def failure_reason(exc: BaseException) -> str:
    """A failed attempt's metric label: http_429, http_4xx, http_5xx, timeout or connection."""
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        return "http_429" if code == 429 else f"http_{code // 100}xx"
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError | StreamCut):
        return "connection"
    return "other"


@dataclass(frozen=True)
class Attempt:
    """One attempt of a call as an observer hears it: `failure` is None when it completed,
    else `failure_reason`; `completion` is the reply, or what streamed before the failure
    (None when nothing did)."""

    seconds: float
    failure: str | None
    completion: Completion | None


class CallObserver(Protocol):
    """Hears each attempt of a call and each retry, at our own call boundary, so that what
    is measured does not depend on the HTTP library inside the SDK (metrics live in
    `streams/`)."""

    def attempt(self, model: str, attempt: Attempt) -> None:
        """One attempt ended (time to first token and tokens/s are in its completion)."""
        ...

    def retry(self, model: str) -> None:
        """The call is about to be tried again after a retryable failure."""
        ...


class NoObserver:
    def attempt(self, model: str, attempt: Attempt) -> None:
        return None

    def retry(self, model: str) -> None:
        return None


def make_client(base_url: str, api_key: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    """A client without its own retries (ours are the only ones); local servers need no key.
    `timeout_s` is only the HTTP library's backstop: `RetryPolicy` bounds each attempt."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How one LLM call is tried: attempts; the silence limits of each streamed attempt
    (before the first token, between chunks) and its total limit; the full-jitter backoff
    between attempts (`uniform(0, min(max_delay_s, base_delay_s * 2**n))`); and after a
    timeout (we closed the stream), at least `settle_s` before the retry, so that the server has
    noticed the closed connection and stopped the generation the retry replaces (llama.cpp
    polls its client's connection every second)."""

    max_attempts: int = 3
    first_token_s: float = 300.0
    gap_s: float = 60.0
    total_s: float = 3600.0
    base_delay_s: float = 0.25
    max_delay_s: float = 4.0
    settle_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def with_(self, **changes: Any) -> RetryPolicy:
        """This policy with some fields changed (None leaves a field as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def limits(self) -> StreamLimits:
        return StreamLimits(self.first_token_s, self.gap_s, self.total_s)


class CompletionError(LycheeError):
    """No completion came back; `str()` is `reason`.

    `retryable_exhausted` is False when the server refused the request (a non-retryable
    error, e.g. a 4xx) and True when retryable failures outlasted the bounded attempts or the
    server asked for a wait longer than `max_delay_s`. `retry_after_s` is the server's hint
    on that last attempt (None for a refusal); `error` is the client's last exception;
    `tokens_per_s` the speed the last attempt was writing at, if it wrote anything.
    `overlong`: the server kept writing past the total limit; not retried, since the same
    request at temperature 0 writes the same (a small model looping), and `partial` holds
    what it wrote.
    """

    def __init__(
        self,
        reason: str,
        *,
        error: BaseException,
        retryable_exhausted: bool,
        retry_after_s: float | None = None,
        tokens_per_s: float | None = None,
        overlong: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error
        self.retryable_exhausted = retryable_exhausted
        self.retry_after_s = retry_after_s
        self.tokens_per_s = tokens_per_s
        self.overlong = overlong

    @property
    def partial(self) -> str:
        """What the last attempt wrote before it failed."""
        partial = getattr(self.error, "partial", None)
        return partial.text if isinstance(partial, Completion) else ""


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
                    f"LLM unavailable after {attempt} attempt(s): {describe(exc)}",
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
    base of LLMEncoder, LLMPlanner and LLMAnswerer. Each subclass states its default
    `policy` as a class attribute. `tokens_per_s` is the speed of its latest reply."""

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
        own); raises CompletionError, its `tokens_per_s` filled from the latest reply when
        the failed attempts wrote nothing."""
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
                max_tokens=max_tokens or self.max_output_tokens,
            )
        except CompletionError as err:
            err.tokens_per_s = err.tokens_per_s or self.tokens_per_s
            raise
        self.tokens_per_s = completion.tokens_per_s or self.tokens_per_s
        return completion


def content(completion: Completion) -> str:
    """The reply's text."""
    return completion.text


def usage_of(completion: Completion, messages: list[dict[str, str]]) -> TokenUsage:
    """One call's usage: real counts from the server, estimated only when it sends no
    `usage` (`prompt_tokens(messages)` in, the reply's `count_tokens` out)."""
    prompt = prompt_tokens(messages)
    if completion.prompt_tokens is not None and completion.completion_tokens is not None:
        return TokenUsage(
            input_tokens=completion.prompt_tokens,
            output_tokens=completion.completion_tokens,
            prompt_tokens=prompt,
            calls=1,
        )
    return TokenUsage(
        input_tokens=prompt,
        output_tokens=count_tokens(content(completion)),
        estimated=True,
        prompt_tokens=prompt,
        calls=1,
    )


def total_usage(usages: list[TokenUsage]) -> TokenUsage:
    """Several calls for one result: counts summed, estimated if any part was, and the
    prompt size of the first call (the prompt proper; later calls are its repairs)."""
    return TokenUsage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        estimated=any(u.estimated for u in usages),
        prompt_tokens=usages[0].prompt_tokens if usages else 0,
        calls=sum(u.calls for u in usages),
    )


_BLANK = frozenset({"", "none", "null", "n/a", "na", "unknown", "-"})
_ISO_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T ]\d{2}:\d{2}.*")


def reply_date(v: Any) -> Any:
    """A date as a model writes it: null and blank words become "", a timestamp its day, a
    bare year number a string; anything else is left for the schema to judge."""
    if v is None:
        return ""
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str):
        return v
    text = v.strip()
    if text.lower() in _BLANK:
        return ""
    return m.group(1) if (m := _ISO_DATETIME.fullmatch(text)) else text


def schema_errors(exc: ValidationError) -> str:
    """The first validation errors of a reply, `field.path: message`, for logs and repairs."""
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors()[:8]
    ]
    return "schema errors: " + "; ".join(parts)


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def json_object(raw: str) -> dict[str, Any]:
    """The JSON object in a model's reply; ValueError says why there is none.

    Code fences and prose around the object are tolerated: cheaper than a repair call.
    orjson, not the stdlib: it rejects lone surrogates (`"\\ud800"`), which the stdlib accepts
    and which would fail later at every sink (Redis, LanceDB, Kafka).
    """
    text = raw.strip()
    if m := _FENCE.match(text):
        text = m.group(1).strip()
    if not text:
        raise ValueError("the reply is empty")
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        start, end = text.find("{"), text.rfind("}")
        try:
            data = orjson.loads(text[start : end + 1]) if 0 <= start < end else None
        except orjson.JSONDecodeError:
            data = None
        if data is None:
            raise ValueError(f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data
