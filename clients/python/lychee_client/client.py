"""The sync client: `LycheeClient(url, namespace, api_key=...)`, one namespace per client
(`with_namespace` for another), methods named as the gateway's routes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any, TypeVar

import httpx

from lychee_client import calls
from lychee_client.calls import Call, SearchResult
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
USER_AGENT = "lychee-client"


def headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request; a key that cannot be a header value (a line break, read
    from a file with its newline; a non-ASCII character, which HTTP headers cannot carry) is
    refused here, not reported as an unreachable gateway or httpx's encoding error."""
    out = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key and not api_key.isprintable():
        raise ValueError("api_key holds a line break or another control character")
    if api_key and not api_key.isascii():
        raise ValueError("api_key holds a non-ASCII character: a header carries ASCII only")
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    return out


class LycheeClient:
    """Talks to one namespace of a gateway over HTTP. Every request is retried on 429 and
    503 as `retry` says; any other failure raises `LycheeHTTPError` (status and problem
    details) or `GatewayUnreachable`. Close it, or use it as a context manager; once closed,
    every call (and a new with-block) raises `ClientClosed`."""

    def __init__(
        self,
        url: str,
        namespace: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        calls.segment(namespace, "namespace")  # refused now, not at its first request
        self.namespace = namespace
        self.retry = retry or RetryPolicy()
        self._own = http is None
        self._http = http or httpx.Client(
            base_url=calls.gateway_url(url), headers=headers(api_key), timeout=timeout_s
        )

    def with_namespace(self, namespace: str) -> LycheeClient:
        """A client of another namespace sharing this one's connections (close this one)."""
        return LycheeClient("", namespace, retry=self.retry, http=self._http)

    def close(self) -> None:
        if self._own:
            self._http.close()

    def __enter__(self) -> LycheeClient:
        if self._http.is_closed:
            raise calls.closed(self._http.base_url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, call: Call[T]) -> T:
        """Send one call with the retry rule; its 2xx body read into its model."""
        if self._http.is_closed:
            raise calls.closed(self._http.base_url)
        for attempt in range(1, self.retry.attempts + 1):
            last = attempt == self.retry.attempts
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params or None, json=call.json()
                )
            except httpx.TransportError as exc:
                if last or not unsent(exc):
                    raise calls.unreachable(call, self._http.base_url, exc) from exc
                time.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.is_success:
                return calls.read(call, response, self._http.base_url)
            if last or not retried(response):
                raise calls.failure(call, response, self._http.base_url, attempt)
            time.sleep(self.retry.wait_s(attempt, response))
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- writes --------------------------------------------------------------------------

    def add(self, exchanges: Iterable[ExchangeIn | Mapping[str, Any]]) -> Receipt:
        """Add exchanges (`ExchangeIn`, or dicts of its fields); the receipt once the broker
        acked them. Pass it to `search(wait_for=...)` or `wait_indexed` to read your writes."""
        return self.send(calls.add(self.namespace, exchanges))

    def add_many(self, exchanges: Iterable[ExchangeIn | Mapping[str, Any]]) -> Receipt:
        """Add any number of exchanges, in order, in as many adds as the gateway's limits
        need (`calls.MAX_EXCHANGES`, `calls.MAX_BODY_BYTES`); one receipt for them all. Not
        atomic: when an add fails, the adds before it stay."""
        receipts = [self.send(call) for call in calls.adds(self.namespace, exchanges)]
        if not receipts:
            raise ValueError("add_many needs at least one exchange")
        return calls.merged(receipts)

    def flush(self, session_id: str, after_seq: int | None = None) -> ControlReceipt:
        """Close the session's open segment now, so that it is consolidated into records."""
        return self.send(calls.control(self.namespace, session_id, "flush", after_seq))

    def end_session(self, session_id: str, after_seq: int | None = None) -> ControlReceipt:
        return self.send(calls.control(self.namespace, session_id, "end", after_seq))

    def forget(self, session_id: str) -> ForgetOut:
        """Forget one session everywhere; returns once every stage confirmed."""
        return self.send(calls.forget(self.namespace, session_id))

    def forget_namespace(self) -> ForgetOut:
        """Forget the whole namespace everywhere; returns once every stage confirmed."""
        return self.send(calls.forget(self.namespace, None))

    # -- reads ---------------------------------------------------------------------------

    def search(
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
        """Evidence for `query` (and its plan); with `wait_for`, once that receipt is
        searchable; with `token_budget`, only its best items that fit a prompt of that many
        tokens (`reply.context_tokens` counts them); `timeout_s`, how long the service may
        take before the gateway answers 504 (the client's own wait is the constructor's)."""
        return self.send(
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

    def records(
        self,
        *,
        session_id: str | None = None,
        memory_type: str | None = None,
        since: date | None = None,
        page: int = 1,
        page_size: int = 50,
    ) -> RecordsPage:
        """One page of memory records, oldest first."""
        return self.send(
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

    def turns(
        self, *, session_id: str | None = None, page: int = 1, page_size: int = 50
    ) -> RecordsPage:
        """One page of raw turns, in conversation order."""
        return self.send(
            calls.listing(
                self.namespace, turns=True, session_id=session_id, page=page, page_size=page_size
            )
        )

    def all_turns(
        self, session_id: str | None = None, page_size: int = 500
    ) -> list[dict[str, Any]]:
        """Every raw turn of the namespace (or session), page after page, read again from the
        first page when the listing's total changes between two pages: a forget or an add
        in between moves rows across a page's edge, one skipped or read twice
        (`ListingChanged` when it changes on every one of `calls.LISTING_READS` reads)."""
        for _ in range(calls.LISTING_READS):
            got = self.turns(session_id=session_id, page=1, page_size=page_size)
            items, total = list(got.items), got.total
            for page in range(2, got.pages + 1):
                got = self.turns(session_id=session_id, page=page, page_size=page_size)
                if got.total != total:
                    break
                items.extend(got.items)
            else:
                return items
        raise ListingChanged(calls.LISTING_READS)

    def status(self, session_id: str | None = None) -> NamespaceStatus:
        return self.send(calls.status(self.namespace, session_id))

    def wait_indexed(self, receipt: Receipt, timeout_s: float = 60.0, poll_s: float = 0.1) -> None:
        """Return once every exchange of `receipt` is indexed (its raw turns readable and
        searchable); `TimeoutError` after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        session = receipt.sessions[0].session_id if len(receipt.sessions) == 1 else None
        while not calls.indexed(receipt, self.status(session)):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"receipt not indexed within {timeout_s} s")
            time.sleep(poll_s)

    # -- dead letters (a key allowed every namespace) -------------------------------------

    def dead_letters(
        self,
        *,
        topic: str | None = None,
        error_type: str | None = None,
        since: datetime | None = None,
    ) -> DeadLettersOut:
        return self.send(calls.dead_letters(topic, error_type, since))

    def replay(self, topic: str, **options: Any) -> ReplayOut:
        """Replay dead letters once each (`ReplayIn`'s fields: error_type, since, dry_run,
        force); 409 when all were replayed before, unless forced."""
        return self.send(calls.replay(ReplayIn(topic=topic, **options)))
