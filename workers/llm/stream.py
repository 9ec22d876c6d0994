"""One streamed chat completion, timed out on silence rather than on its length.

A slow local model (llama.cpp, Ollama on a laptop) may need minutes for a reply it writes
at a steady few tokens per second: a total deadline it can never meet would make every
attempt fail and start the generation again. So the limits are the time to the first token
(the server reads the prompt first), the longest gap between two chunks, and a generous
total. Whatever ends an attempt, the stream is closed before `read_stream` returns or
raises: the server sees the connection go and stops generating (llama.cpp polls its
client's connection every second, prompt processing included, and cancels the task), so a
retry never runs beside the generation it replaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk

from workers.llm.completion import Completion
from workers.llm.errors import StreamCut, StreamTimeout


@dataclass(frozen=True)
class StreamLimits:
    """How long a streamed attempt may stay silent: before its first token (prompt
    processing included), between two chunks, and in total."""

    first_token_s: float = 300.0
    gap_s: float = 60.0
    total_s: float = 3600.0


class _Reader:
    """Accumulates chunks and knows the deadline of the next one."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self.t0 = time.monotonic()
        self.last = self.t0
        self.first: float | None = None
        self.parts: list[str] = []
        self.chunks = 0
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.finish_reason: str | None = None

    def next_deadline(self) -> tuple[str, float, float]:
        """(limit name, limit in s, loop-time deadline) of whatever must arrive next."""
        loop_now, now = asyncio.get_running_loop().time(), time.monotonic()
        name, limit_s, since = (
            ("time-to-first-token", self.limits.first_token_s, self.t0)
            if self.first is None
            else ("token-gap", self.limits.gap_s, self.last)
        )
        return name, limit_s, loop_now + (since + limit_s - now)

    def add(self, chunk: ChatCompletionChunk) -> None:
        now = time.monotonic()
        self.last = now
        if chunk.usage is not None:
            self.prompt_tokens = chunk.usage.prompt_tokens
            self.completion_tokens = chunk.usage.completion_tokens
        for choice in chunk.choices[:1]:
            delta: Any = choice.delta
            text = delta.content or ""
            # reasoning models stream their thinking first: it is progress, not reply text
            thinking = getattr(delta, "reasoning_content", None) or getattr(
                delta, "reasoning", None
            )
            if text or thinking:
                self.chunks += 1
                if self.first is None:
                    self.first = now
            self.parts.append(text)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def result(self) -> Completion:
        return Completion(
            text="".join(self.parts),
            seconds=time.monotonic() - self.t0,
            first_token_s=None if self.first is None else self.first - self.t0,
            chunks=self.chunks,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            finish_reason=self.finish_reason,
        )


async def read_stream(
    opened: Awaitable[AsyncStream[ChatCompletionChunk]], limits: StreamLimits
) -> Completion:
    """The completion streamed by `opened` (a `create(..., stream=True)` not yet awaited).

    Raises StreamTimeout when a limit passes, StreamCut when the stream ends without a
    finish reason, and the client's own errors as they are; the stream is closed first.
    """
    reader = _Reader(limits)
    total_deadline = asyncio.get_running_loop().time() + limits.total_s
    stream: AsyncStream[ChatCompletionChunk] | None = None
    try:
        stream = await _before(reader, total_deadline, opened)
        chunks = stream.__aiter__()
        while True:
            try:
                chunk = await _before(reader, total_deadline, chunks.__anext__())
            except StopAsyncIteration:
                break
            reader.add(chunk)
    finally:
        if stream is not None:
            # not shielded from a cancellation: closing is what tells the server to stop
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.close(), timeout=5.0)
    done = reader.result()
    if done.finish_reason is None:
        raise StreamCut(done)
    return done


async def _before(reader: _Reader, total_deadline: float, step: Awaitable[Any]) -> Any:
    """`step`, unless the next chunk's limit or the total one passes first."""
    name, limit_s, deadline = reader.next_deadline()
    if total_deadline < deadline:
        name, limit_s, deadline = "total", reader.limits.total_s, total_deadline
    limit = asyncio.timeout_at(deadline)
    try:
        async with limit:
            return await step
    except TimeoutError as exc:
        if limit.expired():
            raise StreamTimeout(name, limit_s, reader.result()) from exc
        raise
