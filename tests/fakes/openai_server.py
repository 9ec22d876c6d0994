"""A scripted OpenAI-compatible HTTP server on loopback, for testing our clients end to end.

It runs aiohttp in a background thread with its own event loop, so the real `openai`
clients (sync and async) talk to it over real sockets:

    with FakeOpenAI() as server:
        server.script(status(429), valid({"records": []}))
        client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)

Chat requests consume one scripted action each; with the script empty they follow the
timed phases, if any (`phases((90, status(503)), (30, status(429)))`: every request in the
first 90 s after the first one gets a 503, then 429s for 30 s), then `respond(body)` if
given (a reply chosen from the request, e.g. by its system prompt), then `default_reply`.
Embeddings are deterministic per input text; `script_embeddings` scripts their failures.

A request with `"stream": true` gets its reply as server-sent chunks, about one word each,
then a chunk with the finish reason, a usage chunk when `stream_options.include_usage`,
and `[DONE]`, as OpenAI and llama.cpp send them. `streamed(...)` scripts a slow stream, a
stall in the middle, or a stream cut in the middle (`cut="close"`: the body just ends;
`cut="reset"`: the connection is dropped). `refuse_formats` names the `response_format`
types answered with a 400, as servers without structured outputs answer them, and
`refuse_options` does the same for request parameters (`stream_options` on older Azure
OpenAI). `max_completion_tokens` (or `max_tokens`) is honoured: a longer reply stops there
with the finish reason "length".
`context_tokens` gives the model a context window, stated in `GET /props` as llama.cpp
states it (`states_context="props"`), in the `GET /v1/models` listing (`"models"`) or
nowhere (`"none"`): a request whose prompt, with its reply's cap, does not fit it is refused
with llama.cpp's HTTP 400 and recorded in `oversized`. The fake counts a prompt as a model
with another tokenizer and a chat template would (`model_tokens`), above our own count.
`tool_call(name, **arguments)` answers with a function call, as a model asking for a tool.
`generations` records every chat request's life (until its reply was sent or its client
went away) and `max_parallel` the most that were live at once: a retry must not run
beside the generation it replaces.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from aiohttp import web


@dataclass(frozen=True)
class Reply:
    """Answer with this text as the assistant message."""

    content: str


@dataclass(frozen=True)
class Status:
    """Answer with an HTTP error."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True)
class Slow:
    """Wait, then do `then` (the client may have given up by then)."""

    seconds: float
    then: Action | None = None


@dataclass(frozen=True)
class Streamed:
    """Answer a streamed request with `content`, `gap_s` between chunks; after
    `stall_after` chunks stay silent for `stall_s`; after `cut_after` chunks end the body
    (`cut="close"`) or drop the connection (`cut="reset"`) without a finish reason. A
    request that did not ask to stream gets the whole `content` at once."""

    content: str
    gap_s: float = 0.0
    stall_after: int | None = None
    stall_s: float = 0.0
    cut_after: int | None = None
    cut: Literal["close", "reset"] = "close"


@dataclass(frozen=True)
class ToolCall:
    """Answer (not streamed) with a call of the function `name` with `arguments`, as a model
    asks for a tool (finish reason "tool_calls")."""

    name: str
    arguments: dict[str, Any]


Action = Reply | Status | Slow | Streamed | ToolCall


@dataclass
class Generation:
    """One chat request on the server: from its arrival until its reply was sent or its
    client went away (`closed_by_client`); `chunks` streamed meanwhile."""

    index: int
    request: Any
    chunks: int = 0
    done: bool = False
    closed_by_client: bool = False

    def live(self) -> bool:
        transport = self.request.transport
        return not self.done and transport is not None and not transport.is_closing()


def valid(obj: Any) -> Reply:
    return Reply(json.dumps(obj))


def text(raw: str) -> Reply:
    return Reply(raw)


def status(code: int, headers: dict[str, str] | None = None, body: Any = None) -> Status:
    return Status(code, {"Retry-After": "1"} if headers is None else headers, body)


def tool_call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def slow(seconds: float, then: Action | None = None) -> Slow:
    return Slow(seconds, then)


def streamed(content: str | Any, **kw: Any) -> Streamed:
    """A streamed reply (`content` as text, or an object sent as JSON); see `Streamed`."""
    return Streamed(content if isinstance(content, str) else json.dumps(content), **kw)


def pieces(content: str) -> list[str]:
    """How the fake splits a reply into chunks: words with their leading whitespace."""
    return re.findall(r"\s*\S+", content) or ([content] if content else [])


def fake_tokens(s: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(s.split())


def model_tokens(messages: list[dict[str, Any]]) -> int:
    """A prompt's size as the fake model counts it: o200k tokens plus 5 %, and the chat
    template's tokens around each message and before the reply."""
    from workers.tokens import count_tokens

    text_tokens = sum(count_tokens(str(m.get("content") or "")) for m in messages)
    return int(text_tokens * 1.05) + 7 * len(messages) + 3


def fake_vector(text_: str, dim: int) -> list[float]:
    """Not normalized on purpose: the embedder must normalize."""
    seed = int.from_bytes(hashlib.sha256(text_.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).normal(size=dim) * 3.0
    return [float(x) for x in vec]


class FakeOpenAI:
    """`/v1/chat/completions` and `/v1/embeddings`; `requests` holds every body received."""

    def __init__(
        self,
        *,
        embedding_dim: int = 16,
        default_reply: Action | None = None,
        respond: Callable[[dict[str, Any]], Action | None] | None = None,
    ) -> None:
        self.embedding_dim = embedding_dim
        self.respond = respond  # with the script empty: an action chosen from the request body
        self.default_reply: Action = default_reply or valid(
            {"records": [], "disambiguation_context": ""}
        )
        self.requests: list[dict[str, Any]] = []  # chat bodies, in arrival order
        self.embedding_requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []  # usage of every completion answered
        self.refuse_formats: set[str] = set()  # response_format types answered with a 400
        self.refuse_options: set[str] = set()  # request parameters answered with a 400
        self.generations: list[Generation] = []
        self.context_tokens: int | None = None  # the model's window; None: unbounded
        self.states_context: Literal["props", "models", "none"] = "props"
        self.oversized: list[int] = []  # sizes (prompt and reply cap) of requests refused
        self.max_parallel = 0  # most chat requests live at once
        self._script: deque[Action] = deque()
        self._embedding_script: deque[Action] = deque()
        self._phases: list[tuple[float, Action]] = []
        self._phase_start: float | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._script.extend(actions)

    def script_embeddings(self, *actions: Action) -> None:
        with self._lock:
            self._embedding_script.extend(actions)

    def phases(self, *phases: tuple[float, Action]) -> None:
        """Timed behaviour: each (seconds, action) holds for that long, the clock starting
        at the next chat request; afterwards `default_reply`."""
        with self._lock:
            self._phases = list(phases)
            self._phase_start = None

    def _phase_action(self) -> Action | None:
        if not self._phases:
            return None
        now = time.monotonic()
        if self._phase_start is None:
            self._phase_start = now
        elapsed = now - self._phase_start
        for seconds, action in self._phases:
            if elapsed < seconds:
                return action
            elapsed -= seconds
        return None

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surfaced to start()
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10) or errors:
            raise RuntimeError(f"fake OpenAI server did not start: {errors}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/props", self._props)
        app.router.add_get("/v1/models", self._models)
        # Cancel handlers whose client hung up, so a `slow` reply does not outlive its test;
        # no access log (`lychee bench llm-outage` prints its own report).
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    # --- handlers ----------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            generation = Generation(len(self.requests) - 1, request)
            live = [g for g in self.generations if g.live()]
            self.generations.append(generation)
            self.max_parallel = max(self.max_parallel, len(live) + 1)
            fmt = (body.get("response_format") or {}).get("type")
            refused = sorted(self.refuse_options & set(body))
            oversized = self._oversized(body)
            action: Action = (
                Status(400, {}, _context_refusal(oversized, self.context_tokens or 0))
                if oversized
                else Status(400, {}, _option_refusal(refused[0]))
                if refused
                else Status(400, {}, _format_refusal(fmt))
                if fmt in self.refuse_formats
                else self._script.popleft()
                if self._script
                else self._phase_action()
                or (self.respond(body) if self.respond else None)
                or self.default_reply
            )
        try:
            return await self._answer(request, body, action, generation)
        except (asyncio.CancelledError, ConnectionError):
            generation.closed_by_client = True
            raise
        finally:
            generation.done = True

    def _oversized(self, body: dict[str, Any]) -> int | None:
        """The request's size when it does not fit the context window (under the lock)."""
        if self.context_tokens is None:
            return None
        cap = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        size = model_tokens(body.get("messages", [])) + int(cap)
        if size <= self.context_tokens:
            return None
        self.oversized.append(size)
        return size

    async def _props(self, request: web.Request) -> web.Response:
        if self.context_tokens is None or self.states_context != "props":
            return web.json_response({"error": {"message": "File Not Found"}}, status=404)
        settings = {"n_ctx": self.context_tokens, "temperature": 0.8}
        return web.json_response({"default_generation_settings": settings, "total_slots": 1})

    async def _models(self, request: web.Request) -> web.Response:
        entry: dict[str, Any] = {"id": "fake", "object": "model", "owned_by": "fake"}
        if self.context_tokens is not None and self.states_context == "models":
            entry["max_model_len"] = self.context_tokens
        return web.json_response({"object": "list", "data": [entry]})

    async def _answer(
        self, request: web.Request, body: dict[str, Any], action: Action, generation: Generation
    ) -> web.StreamResponse:
        while isinstance(action, Slow):
            await asyncio.sleep(action.seconds)
            action = action.then or self.default_reply
        if isinstance(action, Status):
            payload = action.body or {"error": {"message": f"scripted {action.code}"}}
            return web.json_response(payload, status=action.code, headers=action.headers)
        if isinstance(action, ToolCall):
            return self._tool_call(body, action)
        reply = action if isinstance(action, Streamed) else Streamed(action.content)
        reply, finish = _capped(reply, body.get("max_completion_tokens") or body.get("max_tokens"))
        prompt = sum(fake_tokens(str(m.get("content") or "")) for m in body.get("messages", []))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": fake_tokens(reply.content),
            "total_tokens": prompt + fake_tokens(reply.content),
        }
        if body.get("stream"):
            return await self._stream(request, body, reply, usage, generation, finish)
        with self._lock:
            self.usages.append(usage)
        return web.json_response(
            {
                **self._head(body, "chat.completion"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": finish,
                    }
                ],
                "usage": usage,
            }
        )

    def _tool_call(self, body: dict[str, Any], action: ToolCall) -> web.Response:
        if body.get("stream"):
            return web.json_response({"error": {"message": "streamed tool calls"}}, status=501)
        call = {
            "id": f"call_{len(self.requests)}",
            "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(action.arguments)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        with self._lock:
            self.usages.append(usage)
        return web.json_response(
            {
                **self._head(body, "chat.completion"),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": usage,
            }
        )

    def _head(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", "fake"),
        }

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: Streamed,
        usage: dict[str, int],
        generation: Generation,
        finish: str,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        head = self._head(body, "chat.completion.chunk")

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            data = json.dumps({**head, "choices": choices, **extra})
            await resp.write(f"data: {data}\n\n".encode())

        for i, piece in enumerate(pieces(reply.content)):
            if i == reply.cut_after:
                return await _cut(request, resp, reply)
            if i and i == reply.stall_after:
                await asyncio.sleep(reply.stall_s)
            elif i and reply.gap_s:
                await asyncio.sleep(reply.gap_s)
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            await send([{"index": 0, "delta": delta, "finish_reason": None}])
            generation.chunks += 1
        if reply.cut_after is not None:
            return await _cut(request, resp, reply)
        await send([{"index": 0, "delta": {}, "finish_reason": finish}])
        with self._lock:
            self.usages.append(usage)
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], usage=usage)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.embedding_requests.append(body)
            action = self._embedding_script.popleft() if self._embedding_script else None
        while isinstance(action, Slow):
            await asyncio.sleep(action.seconds)
            action = action.then
        if isinstance(action, Status):
            payload = action.body or {"error": {"message": f"scripted {action.code}"}}
            return web.json_response(payload, status=action.code, headers=action.headers)
        inputs = body["input"]
        inputs = [inputs] if isinstance(inputs, str) else inputs
        data = []
        for i, item in enumerate(inputs):
            vec = fake_vector(str(item), self.embedding_dim)
            emb: Any = vec
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(fake_tokens(str(x)) for x in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _format_refusal(fmt: str) -> dict[str, Any]:
    """The body OpenAI answers a model without that structured output with."""
    return {
        "error": {
            "message": f"Invalid parameter: 'response_format' of type '{fmt}' is not supported "
            "with this model.",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    }


def _capped(reply: Streamed, limit: int | None) -> tuple[Streamed, str]:
    """The reply cut to `limit` chunks (the fake's tokens) and its finish reason."""
    words = pieces(reply.content)
    if limit is None or len(words) <= limit:
        return reply, "stop"
    return dataclasses.replace(reply, content="".join(words[:limit])), "length"


def _context_refusal(size: int, window: int) -> dict[str, Any]:
    """The body llama.cpp answers a request larger than its context with."""
    return {
        "error": {
            "code": 400,
            "message": f"request ({size} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": size,
            "n_ctx": window,
        }
    }


def _option_refusal(name: str) -> dict[str, Any]:
    """The body older Azure OpenAI versions answer an argument they do not know with."""
    return {
        "error": {
            "message": f"Unrecognized request argument supplied: {name}",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


async def _cut(
    request: web.Request, resp: web.StreamResponse, reply: Streamed
) -> web.StreamResponse:
    """End a stream without its finish reason: the body just ends, or the connection drops."""
    if reply.cut == "reset" and request.transport is not None:
        request.transport.abort()
        return resp
    await resp.write_eof()
    return resp
