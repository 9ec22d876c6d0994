"""The OpenAI Agents SDK over the service: a `Session` whose history is the raw turns of one
service session, and a `search_memory` function tool over the service's search.

One item is one turn (the mapping is `lychee_client.agent_items`). `add_items` returns once
the turns are indexed, so the next run reads them; its items go in as few exchanges as
`MAX_TURNS` and `EXCHANGE_BYTES` allow (large tool outputs stay under the stages' message
limit), sent in as many adds as the gateway's limits need.

The service forgets per session and has no per-turn delete, so `pop_item` rewrites the
session without its last turn, in an order that never loses the rest: the kept turns are
first copied to a session of their own (`backup_of`) and indexed; only then is the session
forgotten and the copy added back; then the copy is forgotten. A pop that stops anywhere
(a timeout, a 413, a cancelled task, a killed process) leaves the history in the session or
in the copy, and the session's next call (`get_items`, `add_items`, `pop_item`) finishes or
undoes it first. The turns are copied as stored (role, content, speaker, created_at,
turn_id, image caption, and each exchange's session_date), not re-made from items. What
remains: while a pop runs, the copy is searchable in the namespace, and a turn another
writer adds to the session during a pop may be lost; the exchanges' metadata (which the
listing does not show) is not kept. `clear_session` forgets the copy, then the session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agents import FunctionTool, function_tool

from lychee_client.agent_items import ITEM_SPEAKER, from_turn, to_turn
from lychee_client.aio import AsyncLycheeClient
from lychee_client.calls import name
from schemas.gateway import ControlReceipt, ExchangeIn, SearchIn

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ITEM_SPEAKER", "LycheeSession", "from_turn", "search_memory_tool", "to_turn"]

# an exchange's limit, as the gateway's own model says it
MAX_TURNS: int = next(
    m.max_length for m in ExchangeIn.model_fields["turns"].metadata if hasattr(m, "max_length")
)
# turns' JSON in one exchange: half the stages' default message limit (LYCHEE_MAX_MESSAGE_BYTES,
# 1 MiB), room for the envelope; a turn larger than this goes alone
EXCHANGE_BYTES = 512 * 1024
STORED = ("role", "content", "speaker", "created_at", "turn_id", "image_caption", "memory")
BACKUP_SUFFIX = ".popping"


def backup_of(session_id: str) -> str:
    """The session a pop copies the kept turns to: the session's id and a suffix, or (for an
    id with no room for it) a digest of it, within the 128 characters of a name."""
    if len(session_id) + len(BACKUP_SUFFIX) > 128:
        session_id = "s" + hashlib.sha256(session_id.encode()).hexdigest()[:40]
    return session_id + BACKUP_SUFFIX


def copies(session_id: str, turns: Sequence[Mapping[str, Any]]) -> list[ExchangeIn]:
    """Listed turns as they were stored, into `session_id`: one exchange per exchange they
    came in (its seq, with its session_date), in order."""
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for turn in turns:
        groups.setdefault(int(turn["seq"]), []).append(turn)
    return [
        ExchangeIn.model_validate(
            {
                "session_id": session_id,
                "session_date": _moment(group[0].get("session_date")),
                "turns": [
                    {k: _stored(k, t.get(k)) for k in STORED if t.get(k) is not None} for t in group
                ],
            }
        )
        for group in groups.values()
    ]


def _stored(key: str, value: Any) -> Any:
    return _moment(value) if key == "created_at" else value


def _moment(value: Any) -> datetime | None:
    """A listed time, zoned: the turns table keeps UTC, a session_date without its zone."""
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _said(turns: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        tuple(t.get(k) for k in ("role", "speaker", "content", "image_caption", "turn_id"))
        for t in turns
    ]


class LycheeSession:
    """The SDK's session protocol over one service session (`session_id`), in the namespace
    of `client`. `wait_s` bounds how long each write waits for its turns to be readable."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, client: AsyncLycheeClient, *, wait_s: float = 60.0):
        self.session_id = name(session_id, "session_id")
        self.backup_id = backup_of(self.session_id)
        self.client = client
        self.wait_s = wait_s

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        await self._settle()
        items = [from_turn(t) for t in await self.client.all_turns(self.session_id)]
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        exchanges = self._exchanges([to_turn(item) for item in items])
        await self._settle()
        await self._add(exchanges)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the last turn and return its item. The order is what keeps the rest (see
        the module's docstring): copy, then forget, then add back, then forget the copy."""
        await self._settle()
        turns = await self.client.all_turns(self.session_id)
        if not turns:
            return None
        kept = turns[:-1]
        await self._add(copies(self.backup_id, kept))
        await self.client.forget(self.session_id)
        await self._add(copies(self.session_id, kept))
        if kept:
            await self.client.forget(self.backup_id)
        return from_turn(turns[-1])

    async def clear_session(self) -> None:
        """Forget the session; the copy of an unfinished pop first, so that nothing brings
        the history back."""
        await self.client.forget(self.backup_id)
        await self.client.forget(self.session_id)

    async def end(self) -> ControlReceipt:
        """The conversation is over: its records are made now, not after the service's idle
        timeout (until then a value the user changed in it is a raw turn beside the record
        of the old one). A later `add_items` goes on in a new segment."""
        await self._settle()  # a pop that stopped midway: its turns back first
        return await self.client.end_session(self.session_id)

    async def _settle(self) -> None:
        """Finish or undo a pop that stopped midway. The copy is complete and indexed before
        the session is forgotten, so a session with fewer turns than the copy (forgotten, or
        added back in part) is rewritten from the copy; one with more never lost anything.
        Then the copy goes."""
        kept = await self.client.all_turns(self.backup_id)
        if not kept:
            return
        current = await self.client.all_turns(self.session_id)
        if len(current) <= len(kept) and _said(current) != _said(kept):
            await self.client.forget(self.session_id)
            await self._add(copies(self.session_id, kept))
        await self.client.forget(self.backup_id)

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
        """Add in as many requests as the gateway's limits need; return once indexed."""
        if exchanges:
            receipt = await self.client.add_many(exchanges)
            await self.client.wait_indexed(receipt, timeout_s=self.wait_s)


def search_memory_tool(
    client: AsyncLycheeClient,
    *,
    k: int = 8,
    timeout_s: float | None = None,
    token_budget: int | None = None,
) -> FunctionTool:
    """A `search_memory(query)` tool: the service's evidence for the query, as the text an
    agent reads (the serialized context the service builds for answering), at most
    `token_budget` tokens of it when given. `k` and the budget are checked here: a bad one
    would fail every call, and the model would see only the SDK's generic tool error."""
    SearchIn(query="k", k=k, token_budget=token_budget)  # raises pydantic's error naming it

    async def search_memory(query: str) -> str:
        """Search the user's long-term memory of earlier conversations.

        Args:
            query: what to look for, as a question or keywords.
        """
        found = await client.search(query, k=k, timeout_s=timeout_s, token_budget=token_budget)
        if found.reply.context:
            return found.reply.context
        return "\n".join(f"- {e.text}" for e in found.evidence) or "nothing remembered"

    return function_tool(search_memory)
