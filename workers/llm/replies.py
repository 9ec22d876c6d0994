"""Reading a model's reply: its text, the JSON object in it, the dates it writes, and its
validation errors in a form fit for logs and repair prompts."""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import ValidationError

from workers.llm.completion import Completion


def content(completion: Completion) -> str:
    """The reply's text."""
    return completion.text


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
