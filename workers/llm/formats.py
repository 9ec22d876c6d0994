"""Structured outputs: the `response_format` a call asks for, and what each endpoint accepts.

A call that wants JSON asks first for `json_schema` built from its reply model (OpenAI,
vLLM, llama.cpp's server and Ollama constrain decoding to it), then `json_object`, then
nothing but the prompt. An endpoint that answers a format is unsupported (a 400 or 422
naming it) is remembered at the next rung down, with one log line, so later calls skip
what it refused. Validation and the repair retry stay either way: a schema narrows what a
model writes, it does not make it right.
"""

from __future__ import annotations

import copy
import re
import threading
from enum import IntEnum
from typing import Any

import openai
import structlog
from pydantic import BaseModel

log = structlog.get_logger("lychee.llm")

JsonSchema = dict[str, Any]


class Format(IntEnum):
    """The rungs, most constrained first."""

    json_schema = 0
    json_object = 1
    prompt_only = 2


def reply_schema(model: type[BaseModel]) -> JsonSchema:
    """A strict JSON schema of `model` as validated (aliases as the model reads them).

    References are inlined, every property is required and no other is allowed (what
    OpenAI's strict mode demands and what makes a local grammar fill every field), and
    titles, docstrings, defaults and length limits are dropped: length limits become huge grammars in
    llama.cpp, and the reply is validated against the model afterwards anyway.
    """
    raw = model.model_json_schema(by_alias=True)
    defs = raw.pop("$defs", {})
    strict: JsonSchema = _strict(raw, defs)
    return strict


_DROP = frozenset(
    {"title", "description", "default", "maxLength", "minLength", "maxItems", "minItems"}
)


def _strict(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_strict(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return _strict(copy.deepcopy(target), defs)
    out = {k: _strict(v, defs) for k, v in node.items() if k not in _DROP}
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def response_format(fmt: Format, name: str, schema: JsonSchema | None) -> dict[str, Any] | None:
    """The request's `response_format` for a rung (None: ask for nothing)."""
    if fmt is Format.json_schema and schema is not None:
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    if fmt is Format.prompt_only:
        return None
    return {"type": "json_object"}


_FORMAT_WORDS = re.compile(
    r"response_format|response format|json_schema|json_object|json schema|structured output"
    r"|guided_json|grammar",
    re.IGNORECASE,
)


def format_refused(exc: BaseException) -> bool:
    """The server refused the request because of its `response_format`: a 400 or 422
    whose error names the format (any other 4xx keeps its meaning)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    return bool(_FORMAT_WORDS.search(f"{exc.message} {exc.body}"))


OPTIONAL_PARAMETERS = ("stream_options", "max_completion_tokens")
"""Request parameters a call can do without: an endpoint that refuses one (older Azure
OpenAI and some proxies answer a 400 naming it) is asked again without it."""


def option_refused(exc: BaseException) -> str | None:
    """The optional parameter a 400 or 422 names, if it names one."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return None
    text = f"{exc.message} {exc.body}"
    return next((name for name in OPTIONAL_PARAMETERS if name in text), None)


class FormatSupport:
    """The lowest rung each endpoint (base URL and model) has been pushed to, and the
    optional parameters it refused; shared by every caller of a process, thread-safe."""

    def __init__(self) -> None:
        self._floor: dict[tuple[str, str], Format] = {}
        self._refused: set[tuple[tuple[str, str], str]] = set()
        self._lock = threading.Lock()

    def takes(self, endpoint: tuple[str, str], option: str) -> bool:
        with self._lock:
            return (endpoint, option) not in self._refused

    def refused_option(self, endpoint: tuple[str, str], option: str, exc: BaseException) -> None:
        """`option` was refused: left out from now on (logged once per endpoint and option)."""
        with self._lock:
            if (endpoint, option) in self._refused:
                return
            self._refused.add((endpoint, option))
        log.warning(
            "llm.option_unsupported",
            base_url=endpoint[0],
            model=endpoint[1],
            option=option,
            error=str(exc)[:300],
        )

    def start(self, endpoint: tuple[str, str], wanted: Format) -> Format:
        """The rung to ask first: the one wanted, or lower if the endpoint refused it."""
        with self._lock:
            return max(wanted, self._floor.get(endpoint, Format.json_schema))

    def refused(self, endpoint: tuple[str, str], fmt: Format, exc: BaseException) -> Format:
        """`fmt` was refused: the next rung, remembered (logged once per endpoint and rung)."""
        lower = Format(min(fmt + 1, Format.prompt_only))
        with self._lock:
            if self._floor.get(endpoint, Format.json_schema) >= lower:
                return self._floor[endpoint]
            self._floor[endpoint] = lower
        log.warning(
            "llm.response_format_unsupported",
            base_url=endpoint[0],
            model=endpoint[1],
            refused=fmt.name,
            now=lower.name,
            error=str(exc)[:300],
        )
        return lower


FORMATS = FormatSupport()
"""The process's memory of what each endpoint refused."""
