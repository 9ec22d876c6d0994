"""The model's context window, as its server states it: read once per endpoint.

llama.cpp states the window it serves in `GET /props` (`default_generation_settings.n_ctx`,
per slot); OpenAI-compatible servers that state one put it in their model listing
(`GET /v1/models`: vLLM's `max_model_len`, `context_length` elsewhere, llama.cpp's
`meta.n_ctx_train`). OpenAI's own API states none: the configured window
(`LYCHEE_LLM_CONTEXT_TOKENS`) stands in for it, and without either no prompt is budgeted.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai

CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")
"""Fields of a model listing's entry that carry the served context length, first found wins."""

READ_TIMEOUT_S = 5.0

Reader = Callable[[str, str, str | None], Awaitable[int | None]]


def props_window(body: Any) -> int | None:
    """llama.cpp's served window from its `/props` body."""
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None


def models_window(body: Any, model: str) -> int | None:
    """The window a `/v1/models` body states for `model` (or for its only entry)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in named:
        for name in CONTEXT_FIELDS:
            if (found := _positive(entry.get(name))) is not None:
                return found
        meta = entry.get("meta")
        if isinstance(meta, dict) and (found := _positive(meta.get("n_ctx_train"))) is not None:
            return found
    return None


def _positive(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


async def read_window(base_url: str, model: str, api_key: str | None) -> int | None:
    """The window the server at `base_url` states for `model`: llama.cpp's `/props` first
    (the window it serves, where a listing may state the one the model was trained for), then
    the model listing. None when it states none; `httpx.HTTPError` when it cannot be reached."""
    base = base_url.rstrip("/")
    root = base.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=READ_TIMEOUT_S, headers=headers) as http:
        for url, read in (
            (f"{root}/props", props_window),
            (f"{base}/models", lambda body: models_window(body, model)),
        ):
            response = await http.get(url)
            if response.status_code != 200:
                continue
            try:
                found = read(response.json())
            except ValueError:  # not JSON
                continue
            if found is not None:
                return found
    return None


class ContextWindows:
    """The context window of each endpoint (base URL and model), read from its server at
    the first call and remembered; shared by every caller of a process. A server that cannot
    be reached is asked again at the next call, one that answered is not."""

    def __init__(self, read: Reader = read_window) -> None:
        self._read = read
        self._stated: dict[tuple[str, str], int | None] = {}
        self._lock = threading.Lock()

    async def of(
        self, client: openai.AsyncOpenAI, model: str, configured: int | None
    ) -> int | None:
        """The window the server states for `model`, else `configured` (None: unknown)."""
        endpoint = (str(client.base_url), model)
        with self._lock:
            known = endpoint in self._stated
            stated = self._stated.get(endpoint)
        if not known:
            try:
                stated = await self._read(str(client.base_url), model, client.api_key)
            except httpx.HTTPError:
                return configured
            with self._lock:
                self._stated[endpoint] = stated
        return stated if stated is not None else configured


WINDOWS = ContextWindows()
