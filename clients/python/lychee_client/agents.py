"""The OpenAI Agents SDK over the service: a `Session` whose history is the raw turns of one
service session, and a `search_memory` function tool over the service's search.

One item is one turn (the mapping, and how an item longer than a turn is made to fit, is
`lychee_client.agent_items`).

`add_items` returns once the turns are indexed, so the next run reads them; items of more
than `EXCHANGE_BYTES` go in several exchanges, so that large tool outputs stay under the
service's message limit. The service forgets per session: `clear_session` forgets the session; `pop_item` forgets it and
adds back every item but the last (a forget and a re-add: costly, and rare in the SDK), the
exchanges made before anything is forgotten.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents import FunctionTool, function_tool

from lychee_client.agent_items import ITEM_SPEAKER, from_turn, to_turn
from lychee_client.aio import AsyncLycheeClient
from lychee_client.calls import name
from schemas.gateway import ExchangeIn, SearchIn

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ITEM_SPEAKER", "LycheeSession", "from_turn", "search_memory_tool", "to_turn"]

MAX_TURNS = 64  # an exchange's limit
# turns' JSON in one exchange: half the stages' default message limit (LYCHEE_MAX_MESSAGE_BYTES,
# 1 MiB), room for the envelope; a turn larger than this goes alone
EXCHANGE_BYTES = 512 * 1024


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
