"""The OpenAI Agents SDK over the service: a `Session` whose history is the raw turns of one
service session, and a `search_memory` function tool over the service's search.

How the SDK's items map onto turns (one item, one turn; one `add_items`, one exchange):

- a message (`role` user, assistant or system) whose content is text, as a string or as
  text parts, is a turn of that role whose content is the text: what the service segments,
  encodes and searches. It comes back as `{"role": ..., "content": text}`, the SDK's easy
  input message (ids, status and annotations of an assistant output are not kept);
- any other item (a function call, its output, a message with images) is an assistant turn
  spoken by `agents-item` whose content is the item as JSON, and comes back as it was.

`add_items` returns once the turns are indexed, so the next run reads them; items of more
than `EXCHANGE_BYTES` go in several exchanges, so that large tool outputs stay under the
service's message limit. An item longer than a turn holds (`TURN_CHARS`: a runaway tool
output) keeps its start: its longest text is cut, with a note of how much was left out, and
the item stays what it was (a message, or JSON the SDK reads back), so the run goes on. The
service forgets per session: `clear_session` forgets the session; `pop_item` forgets it and
adds back every item but the last (a forget and a re-add: costly, and rare in the SDK), the
exchanges made before anything is forgotten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents import FunctionTool, function_tool

from lychee_client.aio import AsyncLycheeClient
from lychee_client.calls import name
from schemas.base import TURN_CHARS
from schemas.gateway import ExchangeIn, SearchIn

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

ITEM_SPEAKER = "agents-item"
MAX_TURNS = 64  # an exchange's limit
# turns' JSON in one exchange: half the stages' default message limit (LYCHEE_MAX_MESSAGE_BYTES,
# 1 MiB), room for the envelope; a turn larger than this goes alone
EXCHANGE_BYTES = 512 * 1024
ROLES = ("user", "assistant", "system")


def _text(content: Any) -> str | None:
    """The text of a message's content, or None when it holds anything but text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = [
            part.get("text")
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text")
        ]
        strings = [t for t in texts if isinstance(t, str)]
        if len(strings) == len(content):
            return "".join(strings)
    return None


def to_turn(item: Mapping[str, Any]) -> dict[str, Any]:
    role = item.get("role")
    if role in ROLES and item.get("type", "message") == "message":
        text = _text(item.get("content"))
        if text is not None and text.strip():
            return {"role": role, "content": _cut(text, len(text) - TURN_CHARS)}
    # as written: escaped, a non-ASCII character would take six of the turn's characters
    content = json.dumps(dict(item), ensure_ascii=False)
    if len(content) > TURN_CHARS:
        value = json.loads(content)  # a copy of its own to cut
        if _shorten(value, len(content) - TURN_CHARS):
            content = json.dumps(value, ensure_ascii=False)
        content = _cut(content, len(content) - TURN_CHARS)  # no string held enough: as text
    return {"role": "assistant", "speaker": ITEM_SPEAKER, "content": content}


def _cut(text: str, excess: int) -> str:
    """`text` shorter by at least `excess` characters, its start kept and the cut said."""
    if excess <= 0:
        return text
    kept = max(len(text) - excess - 80, 0)  # room for the note
    return f"{text[:kept]} [... {len(text) - kept} characters left out: a turn holds {TURN_CHARS}]"


def _shorten(value: dict[str, Any], excess: int) -> bool:
    """Cut `value`'s longest string by `excess` characters, in place, when it has that many
    (a character cut is at least one of the JSON's, so one cut is enough)."""
    found: tuple[int, Any, Any] = (-1, None, None)  # length, container, key
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in pairs:
            if isinstance(child, str) and len(child) > found[0]:
                found = (len(child), node, key)
            elif isinstance(child, dict | list):
                stack.append(child)
    length, container, key = found
    if length <= excess:
        return False
    container[key] = _cut(container[key], excess)
    return True


def from_turn(turn: Mapping[str, Any]) -> TResponseInputItem:
    """The item a turn holds; a turn another client wrote as `ITEM_SPEAKER` whose content is
    no item (not a JSON object) comes back as the message it says, not as an error that would
    stop every later read of the session."""
    if turn.get("speaker") == ITEM_SPEAKER:
        try:
            found = json.loads(turn["content"])
        except ValueError:
            found = None
        if isinstance(found, dict):
            item: TResponseInputItem = found  # type: ignore[assignment]
            return item
    message: TResponseInputItem = {"role": turn["role"], "content": turn["content"]}
    return message


class LycheeSession:
    """The SDK's session protocol over one service session (`session_id`), in the namespace
    of `client`. `wait_s` bounds how long `add_items` waits for its turns to be readable."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, client: AsyncLycheeClient, *, wait_s: float = 60.0):
        self.session_id = name(session_id, "session_id")
        self.client = client
        self.wait_s = wait_s

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = [from_turn(t) for t in await self.client.all_turns(self.session_id)]
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self._add(self._exchanges([to_turn(item) for item in items]))

    async def pop_item(self) -> TResponseInputItem | None:
        items = await self.get_items()
        if not items:
            return None
        kept = self._exchanges([to_turn(item) for item in items[:-1]])
        await self.client.forget(self.session_id)
        await self._add(kept)
        return items[-1]

    async def clear_session(self) -> None:
        await self.client.forget(self.session_id)

    def _exchanges(self, turns: Sequence[dict[str, Any]]) -> list[ExchangeIn]:
        """The turns in order, as few exchanges as `MAX_TURNS` and `EXCHANGE_BYTES` allow."""
        groups: list[list[dict[str, Any]]] = []
        size = 0
        for turn in turns:
            grown = len(json.dumps(turn, ensure_ascii=False).encode())
            if not groups or len(groups[-1]) == MAX_TURNS or size + grown > EXCHANGE_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(turn)
            size += grown
        return [
            ExchangeIn.model_validate({"session_id": self.session_id, "turns": group})
            for group in groups
        ]

    async def _add(self, exchanges: list[ExchangeIn]) -> None:
        if exchanges:
            receipt = await self.client.add(exchanges)
            await self.client.wait_indexed(receipt, timeout_s=self.wait_s)


def search_memory_tool(
    client: AsyncLycheeClient, *, k: int = 8, timeout_s: float | None = None
) -> FunctionTool:
    """A `search_memory(query)` tool: the service's evidence for the query, as the text an
    agent reads (the serialized context the service builds for answering). `k` is checked
    here: a bad one would fail every call, and the model would see only the SDK's generic
    tool error."""
    SearchIn(query="k", k=k)  # raises pydantic's error naming k

    async def search_memory(query: str) -> str:
        """Search the user's long-term memory of earlier conversations.

        Args:
            query: what to look for, as a question or keywords.
        """
        found = await client.search(query, k=k, timeout_s=timeout_s)
        if found.reply.context:
            return found.reply.context
        return "\n".join(f"- {e.text}" for e in found.evidence) or "nothing remembered"

    return function_tool(search_memory)
