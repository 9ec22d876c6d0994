"""LangGraph's long-term memory (`langgraph.store.base.BaseStore`) kept by the service.

How LangGraph's items map onto the service (one store, one service namespace):

- an item (LangGraph namespace tuple + key) is one service *session*, named
  `lg-` + a hash of the tuple and key (a session id allows 128 characters of a small
  alphabet; LangGraph's labels allow any text);
- a `put` adds one exchange to that session: one user turn (speaker `langgraph`) whose text
  is `{"namespace": [...], "key": ..., "value": {...}}` as JSON (non-ASCII as is: a value of
  up to `TURN_CHARS` characters as JSON fits), so the turn is searchable and says which item
  it is; a second put of the same key adds a newer exchange, and a read takes the newest
  (highest seq); `put` returns once the turn is indexed, so a `get` right after it reads it.
  A value JSON cannot hold (a datetime, a set, an object) is a ValueError naming the key and
  the type: InMemoryStore keeps the object itself, which a JSON store cannot give back, and
  turning it into a string would change its type under the caller's feet. The consecutive
  puts of a batch go in as many adds as the gateway's limits need (`add_many`);
- a `delete` (a put of None) forgets the item's session: every version of it, and the
  records only it supports, removed from every stage (the service's forget has session
  scope, so each item has a session of its own);
- `search` keeps the items under the namespace prefix that the filter (equality, nested
  objects, `$eq $ne $gt $gte $lt $lte`) keeps, then pages them (offset, limit). With a query
  it runs the service's search over the namespace: first come the items its evidence came
  from (a turn, or a record derived from the item's session), in its order, scored by the
  evidence's `final` score; when the namespace's other items outrank the prefix's, the search
  is asked again with the service's largest k (200 evidence items), and the prefix's items
  still unranked follow, score 0.0, those sharing more of the query's words first (as
  InMemoryStore, which returns every item of the prefix). So no item of the prefix is missed;
  beyond the first 200 of the namespace, the order among them is by words, not by meaning.
  Without a query it lists them, newest first;
- `list_namespaces` reads the namespaces off the items.

The service has no per-item index settings or TTL: `index` is ignored (every item is
searchable) and `supports_ttl` is False. The async forms use the async client when the
store has one, else the sync batch in a worker thread (the event loop is never blocked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

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

from lychee_client.aio import AsyncLycheeClient
from lychee_client.client import LycheeClient
from schemas import EvidenceItem, Role
from schemas.base import TURN_CHARS, shown
from schemas.gateway import ExchangeIn

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


def _asks(query: str | None) -> TypeGuard[str]:
    """Whether a search names something to look for: a blank query lists, as none does."""
    return bool(query and query.strip())


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
    docstring for the mapping). The sync forms use `client`; the async forms use `aclient`
    when given (else they run the sync batch in a worker thread). `wait_s` bounds how long a
    put waits to be readable, `search_timeout_s` a search (None: the gateway's default)."""

    def __init__(
        self,
        client: LycheeClient,
        aclient: AsyncLycheeClient | None = None,
        *,
        wait_s: float = 60.0,
        search_timeout_s: float | None = None,
    ) -> None:
        self.client = client
        self.aclient = aclient
        self.wait_s = wait_s
        self.search_timeout_s = search_timeout_s

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        pending: list[ExchangeIn] = []
        for op in ops:
            if isinstance(op, PutOp) and op.value is not None:
                pending.append(exchange_of(op))
                results.append(None)
                continue
            self._write(pending)  # a read or delete sees the puts before it
            pending = []
            if isinstance(op, PutOp):
                self.client.forget(session_of(op.namespace, op.key))
                results.append(None)
            elif isinstance(op, GetOp):
                session = session_of(op.namespace, op.key)
                results.append(_items(self.client.all_turns(session)).get(session))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(list_namespaces(op, self._all()))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        self._write(pending)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, list(ops))
        results: list[Result] = []
        pending: list[ExchangeIn] = []
        for op in ops:
            if isinstance(op, PutOp) and op.value is not None:
                pending.append(exchange_of(op))
                results.append(None)
                continue
            await self._awrite(self.aclient, pending)
            pending = []
            if isinstance(op, PutOp):
                await self.aclient.forget(session_of(op.namespace, op.key))
                results.append(None)
            elif isinstance(op, GetOp):
                session = session_of(op.namespace, op.key)
                results.append(_items(await self.aclient.all_turns(session)).get(session))
            elif isinstance(op, SearchOp):
                results.append(await self._asearch(self.aclient, op))
            elif isinstance(op, ListNamespacesOp):
                results.append(list_namespaces(op, await self._aall(self.aclient)))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        await self._awrite(self.aclient, pending)
        return results

    # -- the service calls, sync then async ------------------------------------------------

    def _write(self, exchanges: list[ExchangeIn]) -> None:
        """Add the puts of a batch (in as many adds as the gateway's limits need), and
        return when they are readable."""
        if exchanges:
            receipt = self.client.add_many(exchanges)
            self.client.wait_indexed(receipt, timeout_s=self.wait_s)

    def _all(self) -> dict[str, Item]:
        return _items(self.client.all_turns())

    def _search(self, op: SearchOp) -> list[SearchItem]:
        """A search op: ranked by the service's search, widened while the prefix's items
        are outranked (see `wider_k`)."""
        items = self._all()
        if not _asks(op.query):
            return search_items(op, items, None)
        k: int | None = first_k(op)
        while k is not None:
            found = self.client.search(op.query, k=k, timeout_s=self.search_timeout_s)
            evidence, k = found.evidence, wider_k(op, items, found.evidence, k)
        return search_items(op, items, evidence)

    async def _awrite(self, aclient: AsyncLycheeClient, exchanges: list[ExchangeIn]) -> None:
        if exchanges:
            receipt = await aclient.add_many(exchanges)
            await aclient.wait_indexed(receipt, timeout_s=self.wait_s)

    async def _aall(self, aclient: AsyncLycheeClient) -> dict[str, Item]:
        return _items(await aclient.all_turns())

    async def _asearch(self, aclient: AsyncLycheeClient, op: SearchOp) -> list[SearchItem]:
        items = await self._aall(aclient)
        if not _asks(op.query):
            return search_items(op, items, None)
        k: int | None = first_k(op)
        while k is not None:
            found = await aclient.search(op.query, k=k, timeout_s=self.search_timeout_s)
            evidence, k = found.evidence, wider_k(op, items, found.evidence, k)
        return search_items(op, items, evidence)


def first_k(op: SearchOp) -> int:
    """The first search's k: five evidence items per item asked for, within the service's."""
    return min(MAX_SEARCH_K, max(50, (op.offset + op.limit) * 5))


def wider_k(
    op: SearchOp, items: dict[str, Item], evidence: list[EvidenceItem], k: int
) -> int | None:
    """The k of one more search, or None when `evidence` serves the op: it ranks as many of
    the items in the op's prefix and filter as the page needs, the service found fewer than
    k (nothing more to find), or k is the service's largest."""
    scope = in_scope(op, items)
    ranked = {ev.session_id for ev in evidence if ev.session_id in scope}
    if len(ranked) >= min(op.offset + op.limit, len(scope)) or len(evidence) < k:
        return None
    return MAX_SEARCH_K if k < MAX_SEARCH_K else None


def exchange_of(op: PutOp) -> ExchangeIn:
    """The exchange a put adds: one user turn holding the item as JSON, written as is (a
    non-ASCII character is one of the turn's characters, not a six-character escape)."""
    assert op.value is not None
    item = {"namespace": list(op.namespace), "key": op.key, "value": dict(op.value)}
    try:
        doc = json.dumps(item, ensure_ascii=False, default=_not_json)
    except _NotJson as exc:
        raise ValueError(
            f"the item {op.key!r} holds {exc}, which JSON does not: the store keeps JSON values "
            "(dicts, lists, strings, numbers, booleans, None), as LangGraph's Postgres store "
            "does; convert it first (a datetime with .isoformat())"
        ) from None
    if len(doc) > TURN_CHARS:
        raise ValueError(
            f"the item {op.key!r} is {len(doc)} characters as JSON, more than the {TURN_CHARS} "
            "a turn of the service holds"
        )
    turn = {"role": Role.user, "speaker": SPEAKER, "content": doc, "created_at": datetime.now(UTC)}
    return ExchangeIn.model_validate(
        {"session_id": session_of(op.namespace, op.key), "turns": [turn]}
    )


class _NotJson(ValueError):
    """A value `json.dumps` cannot write, named by its type."""


def _not_json(value: Any) -> Any:
    raise _NotJson(f"a {type(value).__module__}.{type(value).__qualname__} ({shown(value)})")


def in_scope(op: SearchOp, items: dict[str, Item]) -> dict[str, Item]:
    """The items under the op's namespace prefix that its filter keeps, by session id."""
    prefix = tuple(op.namespace_prefix)
    return {
        session: item
        for session, item in items.items()
        if item.namespace[: len(prefix)] == prefix
        and all(matches_filter(item.value.get(k), v) for k, v in (op.filter or {}).items())
    }


def search_items(
    op: SearchOp, items: dict[str, Item], evidence: list[EvidenceItem] | None
) -> list[SearchItem]:
    """The items a search returns, within the op's prefix and filter, then paged. With a
    query: first those the evidence came from, in its order (each item once), scored by its
    best-ranked evidence's `final` (the fusion's 0..1 score), never above the score before it:
    the reply's order also weighs diversity, and a score rising down the list would say the
    opposite of the order. Then, as InMemoryStore returns every item of the prefix, the ones
    the evidence missed (outranked by the namespace's other items), score 0.0, those sharing
    more of the query's words first. Without a query: newest first, no score."""
    scope = in_scope(op, items)
    ranked: list[tuple[Item, float | None]] = []
    if evidence is not None:
        seen: set[str] = set()
        above: float | None = None
        for ev in evidence:
            if ev.session_id in scope and ev.session_id not in seen:
                seen.add(ev.session_id)
                above = _score(ev, above)
                ranked.append((scope[ev.session_id], above))
        rest = [item for session, item in scope.items() if session not in seen]
        words = _words(op.query or "")
        rest.sort(key=lambda i: (len(words & _words(json.dumps(i.value))), i.updated_at))
        ranked += [(item, 0.0) for item in reversed(rest)]
    else:
        ordered = sorted(scope.values(), key=lambda i: i.updated_at, reverse=True)
        ranked = [(item, None) for item in ordered]
    return [
        SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)
        for item, score in ranked[op.offset : op.offset + op.limit]
    ]


def _score(ev: EvidenceItem, above: float | None) -> float | None:
    final = ev.scores.get("final")
    if final is None:
        return above
    return final if above is None else min(final, above)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def list_namespaces(op: ListNamespacesOp, items: dict[str, Item]) -> list[tuple[str, ...]]:
    found = {item.namespace for item in items.values()}
    if op.match_conditions:
        found = {ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions)}
    if op.max_depth is not None:
        found = {ns[: op.max_depth] for ns in found}
    return sorted(found)[op.offset : op.offset + op.limit]
