"""The async client: `AsyncLycheeClient`, the same methods as `LycheeClient`, awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any, TypeVar

import httpx

from lychee_client import calls
from lychee_client.calls import Call, SearchResult
from lychee_client.client import headers
from lychee_client.errors import ListingChanged
from lychee_client.retry import RetryPolicy, retried, unsent
from schemas.gateway import (
    ControlReceipt,
    DeadLettersOut,
    ExchangeIn,
    ForgetOut,
    NamespaceStatus,
    Receipt,
    RecordsPage,
    ReplayIn,
    ReplayOut,
)

T = TypeVar("T")


class AsyncLycheeClient:
    """Talks to one namespace of a gateway over HTTP, from asyncio; see `LycheeClient`."""

    def __init__(
        self,
        url: str,
        namespace: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        calls.segment(namespace, "namespace")  # refused now, not at its first request
        self.namespace = namespace
        self.retry = retry or RetryPolicy()
        self._own = http is None
        self._http = http or httpx.AsyncClient(
            base_url=calls.gateway_url(url), headers=headers(api_key), timeout=timeout_s
        )

    def with_namespace(self, namespace: str) -> AsyncLycheeClient:
        """A client of another namespace sharing this one's connections (close this one)."""
        return AsyncLycheeClient("", namespace, retry=self.retry, http=self._http)

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncLycheeClient:
        if self._http.is_closed:
            raise calls.closed(self._http.base_url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send one call with the retry rule; its 2xx body read into its model."""
        if self._http.is_closed:
            raise calls.closed(self._http.base_url)
        for attempt in range(1, self.retry.attempts + 1):
            last = attempt == self.retry.attempts
            try:
                response = await self._http.request(
                    call.method, call.path, params=call.params or None, json=call.json()
                )
            except httpx.TransportError as exc:
                if last or not unsent(exc):
                    raise calls.unreachable(call, self._http.base_url, exc) from exc
                await asyncio.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.is_success:
                return calls.read(call, response, self._http.base_url)
            if last or not retried(response):
                raise calls.failure(call, response, self._http.base_url, attempt)
            await asyncio.sleep(self.retry.wait_s(attempt, response))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def add(self, exchanges: Iterable[ExchangeIn | Mapping[str, Any]]) -> Receipt:
        return await self.send(calls.add(self.namespace, exchanges))

    async def add_many(self, exchanges: Iterable[ExchangeIn | Mapping[str, Any]]) -> Receipt:
        receipts = [await self.send(call) for call in calls.adds(self.namespace, exchanges)]
        if not receipts:
            raise ValueError("add_many needs at least one exchange")
        return calls.merged(receipts)

    async def flush(self, session_id: str, after_seq: int | None = None) -> ControlReceipt:
        return await self.send(calls.control(self.namespace, session_id, "flush", after_seq))

    async def end_session(self, session_id: str, after_seq: int | None = None) -> ControlReceipt:
        return await self.send(calls.control(self.namespace, session_id, "end", after_seq))

    async def forget(self, session_id: str) -> ForgetOut:
        return await self.send(calls.forget(self.namespace, session_id))

    async def forget_namespace(self) -> ForgetOut:
        return await self.send(calls.forget(self.namespace, None))

    async def search(
        self,
        query: str,
        *,
        k: int = 10,
        session_id: str | None = None,
        answer: bool = False,
        wait_for: Receipt | None = None,
        timeout_s: float | None = None,
        token_budget: int | None = None,
    ) -> SearchResult:
        return await self.send(
            calls.search(
                self.namespace,
                query,
                k=k,
                session_id=session_id,
                answer=answer,
                wait_for=wait_for,
                timeout_s=timeout_s,
                token_budget=token_budget,
            )
        )

    async def records(
        self,
        *,
        session_id: str | None = None,
        memory_type: str | None = None,
        since: date | None = None,
        page: int = 1,
        page_size: int = 50,
    ) -> RecordsPage:
        return await self.send(
            calls.listing(
                self.namespace,
                turns=False,
                session_id=session_id,
                memory_type=memory_type,
                since=since,
                page=page,
                page_size=page_size,
            )
        )

    async def turns(
        self, *, session_id: str | None = None, page: int = 1, page_size: int = 50
    ) -> RecordsPage:
        return await self.send(
            calls.listing(
                self.namespace, turns=True, session_id=session_id, page=page, page_size=page_size
            )
        )

    async def all_turns(
        self, session_id: str | None = None, page_size: int = 500
    ) -> list[dict[str, Any]]:
        """Every raw turn of the namespace (or session), page after page, read again from the
        first page when the listing's total changes between two pages: a forget or an add
        in between moves rows across a page's edge, one skipped or read twice
        (`ListingChanged` when it changes on every one of `calls.LISTING_READS` reads)."""
        for _ in range(calls.LISTING_READS):
            got = await self.turns(session_id=session_id, page=1, page_size=page_size)
            items, total = list(got.items), got.total
            for page in range(2, got.pages + 1):
                got = await self.turns(session_id=session_id, page=page, page_size=page_size)
                if got.total != total:
                    break
                items.extend(got.items)
            else:
                return items
        raise ListingChanged(calls.LISTING_READS)

    async def status(self, session_id: str | None = None) -> NamespaceStatus:
        return await self.send(calls.status(self.namespace, session_id))

    async def wait_indexed(
        self, receipt: Receipt, timeout_s: float = 60.0, poll_s: float = 0.1
    ) -> None:
        deadline = time.monotonic() + timeout_s
        session = receipt.sessions[0].session_id if len(receipt.sessions) == 1 else None
        while not calls.indexed(receipt, await self.status(session)):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"receipt not indexed within {timeout_s} s")
            await asyncio.sleep(poll_s)

    async def dead_letters(
        self,
        *,
        topic: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
    ) -> DeadLettersOut:
        return await self.send(calls.dead_letters(topic, error_type, since))

    async def replay(self, topic: str, **options: Any) -> ReplayOut:
        return await self.send(calls.replay(ReplayIn(topic=topic, **options)))
