"""A scripted OpenAI-compatible HTTP server on loopback, for testing adapters end to end.

It runs aiohttp in a background thread with its own event loop, so the real `openai`
clients (sync and async) talk to it over real sockets:

    with FakeOpenAI() as server:
        server.script(status(429), valid({"records": []}))
        client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)

Chat requests consume one scripted action each; with the script empty they follow the
timed phases, if any (`phases((90, status(503)), (30, status(429)))`: every request in the
first 90 s after the first one gets a 503, then 429s for 30 s), then `default_reply`.
Embeddings are deterministic per input text; `script_embeddings` scripts their failures.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

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


Action = Reply | Status | Slow


def valid(obj: Any) -> Reply:
    return Reply(json.dumps(obj))


def text(raw: str) -> Reply:
    return Reply(raw)


def status(code: int, headers: dict[str, str] | None = None, body: Any = None) -> Status:
    return Status(code, {"Retry-After": "1"} if headers is None else headers, body)


def slow(seconds: float, then: Action | None = None) -> Slow:
    return Slow(seconds, then)


def fake_tokens(s: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(s.split())


def fake_vector(text_: str, dim: int) -> list[float]:
    """Not normalized on purpose: the adapter must normalize."""
    seed = int.from_bytes(hashlib.sha256(text_.encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).normal(size=dim) * 3.0
    return [float(x) for x in vec]


class FakeOpenAI:
    """`/v1/chat/completions` and `/v1/embeddings`; `requests` holds every body received."""

    def __init__(self, *, embedding_dim: int = 16, default_reply: Action | None = None) -> None:
        self.embedding_dim = embedding_dim
        self.default_reply: Action = default_reply or valid(
            {"records": [], "disambiguation_context": ""}
        )
        self.requests: list[dict[str, Any]] = []  # chat bodies, in arrival order
        self.embedding_requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []  # usage of every completion answered
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
        # Cancel handlers whose client hung up, so a `slow` reply does not outlive its test;
        # no access log (`lychee bench llm-outage` prints its own report).
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    # --- handlers ----------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            action = (
                self._script.popleft()
                if self._script
                else self._phase_action() or self.default_reply
            )
        while isinstance(action, Slow):
            await asyncio.sleep(action.seconds)
            action = action.then or self.default_reply
        if isinstance(action, Status):
            payload = action.body or {"error": {"message": f"scripted {action.code}"}}
            return web.json_response(payload, status=action.code, headers=action.headers)
        prompt = sum(fake_tokens(str(m.get("content") or "")) for m in body.get("messages", []))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": fake_tokens(action.content),
            "total_tokens": prompt + fake_tokens(action.content),
        }
        with self._lock:
            self.usages.append(usage)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": action.content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
        )

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
