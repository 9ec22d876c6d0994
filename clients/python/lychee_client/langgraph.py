"""LangGraph's long-term memory (`langgraph.store.base.BaseStore`) kept by the service.

How LangGraph's items map onto the service (one store, one service namespace):

- an item (LangGraph namespace tuple + key) is one service *session*, named
  `lg-` + a hash of the tuple and key (a session id allows 128 characters of a small
  alphabet; LangGraph's labels allow any text);
- a `put` adds one exchange to that session: one user turn (speaker `langgraph`) whose text
  is `{"namespace": [...], "key": ..., "value": {...}}` as JSON, so the turn is searchable
  and says which item it is; a second put of the same key adds a newer exchange, and a read
  takes the newest (highest seq); `put` returns once the turn is indexed, so a `get` right
  after it reads it;
- a `delete` (a put of None) forgets the item's session: every version of it, and the
  records only it supports, removed from every stage (the service's forget has session
  scope, so each item has a session of its own);
- `search` with a query runs the service's search over the namespace and keeps, in rank
  order, the items its evidence came from (a turn, or a record derived from the item's
  session); without a query it lists the items. Both then apply the namespace prefix and
  the filter (equality, nested objects, `$eq $ne $gt $gte $lt $lte`), offset and limit;
- `list_namespaces` reads the namespaces off the items.

The service has no per-item index settings or TTL: `index` is ignored (every item is
searchable) and `supports_ttl` is False. The async forms run the same batch in a worker
thread, so the event loop is not blocked.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from lychee_client.client import LycheeClient
from schemas import Role
from schemas.gateway import ExchangeIn, Receipt

SPEAKER = "langgraph"
SESSION_PREFIX = "lg-"
MAX_SEARCH_K = 200


def session_of(namespace: tuple[str, ...], key: str) -> str:
    """The service session that holds one LangGraph item."""
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
    return f"{SESSION_PREFIX}{digest[:48]}"


@dataclass
class _Version:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    seq: int
    created_at: datetime


def _version(turn: Mapping[str, Any]) -> _Version | None:
    """An item version from a raw turn this store wrote (None for any other turn)."""
    if turn.get("speaker") != SPEAKER or not str(turn.get("session_id", "")).startswith(
        SESSION_PREFIX
    ):
        return None
    try:
        doc = json.loads(turn["content"])
        namespace, key, value = tuple(doc["namespace"]), doc["key"], doc["value"]
    except (ValueError, KeyError, TypeError):
        return None
    created = turn.get("created_at")
    when = datetime.fromisoformat(created) if isinstance(created, str) else datetime.now(UTC)
    if when.tzinfo is None:  # the turns table keeps UTC without its zone
        when = when.replace(tzinfo=UTC)
    return _Version(namespace, key, value, int(turn.get("seq", 0)), when)


def _items(turns: Iterable[Mapping[str, Any]]) -> dict[str, Item]:
    """The newest version of every item, by session id; created_at from its first version."""
    versions: dict[str, list[_Version]] = {}
    for turn in turns:
        if (v := _version(turn)) is not None:
            versions.setdefault(str(turn["session_id"]), []).append(v)
    items = {}
    for session, found in versions.items():
        found.sort(key=lambda v: v.seq)
        first, last = found[0], found[-1]
        items[session] = Item(
            value=last.value,
            key=last.key,
            namespace=last.namespace,
            created_at=first.created_at,
            updated_at=last.created_at,
        )
    return items


def matches_filter(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: equality, nested objects, and `$` comparisons."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, dict) and all(
            matches_filter(value.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(matches_filter(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _compare(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    if op == "$gt":
        return float(value) > float(arg)
    if op == "$gte":
        return float(value) >= float(arg)
    if op == "$lt":
        return float(value) < float(arg)
    if op == "$lte":
        return float(value) <= float(arg)
    raise ValueError(f"unsupported filter operator {op!r}")


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


class LycheeStore(BaseStore):
    """A LangGraph store whose items live in one namespace of the service (see the module's
    docstring for the mapping). `wait_s` bounds how long a put waits to be readable,
    `search_timeout_s` a search (None: the gateway's default)."""

    def __init__(
        self, client: LycheeClient, *, wait_s: float = 60.0, search_timeout_s: float | None = None
    ) -> None:
        self.client = client
        self.wait_s = wait_s
        self.search_timeout_s = search_timeout_s

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        pending: list[ExchangeIn] = []
        for op in ops:
            if isinstance(op, PutOp) and op.value is not None:
                pending.append(self._exchange(op.namespace, op.key, dict(op.value)))
                results.append(None)
                continue
            self._write(pending)
            pending = []
            if isinstance(op, PutOp):
                self.client.forget(session_of(op.namespace, op.key))
                results.append(None)
            elif isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        self._write(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- the operations -----------------------------------------------------------------

    def _exchange(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> ExchangeIn:
        doc = json.dumps({"namespace": list(namespace), "key": key, "value": value})
        turn = {
            "role": Role.user,
            "speaker": SPEAKER,
            "content": doc,
            "created_at": datetime.now(UTC),
        }
        return ExchangeIn.model_validate(
            {"session_id": session_of(namespace, key), "turns": [turn]}
        )

    def _write(self, exchanges: list[ExchangeIn]) -> None:
        """Add the puts of a batch at once, and return when they are readable."""
        if not exchanges:
            return
        receipt: Receipt = self.client.add(exchanges)
        self.client.wait_indexed(receipt, timeout_s=self.wait_s)

    def _get(self, op: GetOp) -> Item | None:
        session = session_of(op.namespace, op.key)
        return _items(self.client.all_turns(session)).get(session)

    def _all(self) -> dict[str, Item]:
        return _items(
            t
            for t in self.client.all_turns()
            if str(t.get("session_id", "")).startswith(SESSION_PREFIX)
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        items = self._all()
        ranked: list[tuple[Item, float | None]]
        if op.query:
            k = min(MAX_SEARCH_K, max(50, (op.offset + op.limit) * 5))
            ranked, seen = [], set()
            for ev in self.client.search(op.query, k=k, timeout_s=self.search_timeout_s).evidence:
                if ev.session_id in items and ev.session_id not in seen:
                    seen.add(ev.session_id)
                    score = max(ev.scores.values()) if ev.scores else None
                    ranked.append((items[ev.session_id], score))
        else:
            ordered = sorted(items.values(), key=lambda i: i.updated_at, reverse=True)
            ranked = [(item, None) for item in ordered]
        prefix = tuple(op.namespace_prefix)
        kept = [
            SearchItem(
                item.namespace, item.key, item.value, item.created_at, item.updated_at, score
            )
            for item, score in ranked
            if item.namespace[: len(prefix)] == prefix
            and all(matches_filter(item.value.get(k), v) for k, v in (op.filter or {}).items())
        ]
        return kept[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {item.namespace for item in self._all().values()}
        if op.match_conditions:
            found = {
                ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions)
            }
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]
