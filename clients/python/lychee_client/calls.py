"""What each client method sends and how its answer is read, once for the sync and the async
clients: a method builds a `Call`, the client sends it (with its retries) and `Call.read`
turns the JSON into the `schemas` models."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from lychee_client.errors import (
    ClientClosed,
    GatewayTimedOut,
    GatewayUnreachable,
    LycheeHTTPError,
    UnreadableReply,
)
from lychee_client.retry import retry_after_s
from schemas import EvidenceItem, QueryReply
from schemas.base import check_name
from schemas.errors import ContractError
from schemas.gateway import (
    AddExchanges,
    ControlIn,
    ControlReceipt,
    DeadLettersOut,
    ExchangeIn,
    ForgetOut,
    NamespaceStatus,
    Problem,
    Receipt,
    RecordsPage,
    ReplayIn,
    ReplayOut,
    SearchIn,
    SessionReceipt,
    WaitFor,
)
from schemas.plan import Plan

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# What the gateway takes in one add, at its defaults (LYCHEE_GATEWAY_MAX_EXCHANGES and
# LYCHEE_GATEWAY_MAX_BODY_BYTES: server settings, which the client cannot read); `add_many`
# keeps under both. The body is measured as httpx sends it; the margin is the envelope's.
LISTING_READS = 5  # reads of a listing that changes between its pages, before giving up
MAX_EXCHANGES = 1000
MAX_BODY_BYTES = 16 * 1024 * 1024
_ENVELOPE_BYTES = 1024


@dataclass(frozen=True)
class SearchResult:
    """A search's reply, with its plan read into `schemas.plan.Plan` (None when the query
    service sent none) and its evidence as `schemas.EvidenceItem`s, best first."""

    reply: QueryReply
    plan: Plan | None

    @property
    def evidence(self) -> list[EvidenceItem]:
        return self.reply.evidence

    @property
    def answer(self) -> str | None:
        return self.reply.answer

    @property
    def context(self) -> str:
        """The evidence as the answer prompt reads it: what an agent puts in its own prompt."""
        return self.reply.context

    @property
    def context_tokens(self) -> int:
        return self.reply.context_tokens


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: where, what, and how its 2xx JSON is read."""

    method: str
    path: str
    read: Callable[[Any], T]
    params: dict[str, str | int | bool] = field(default_factory=dict)
    body: BaseModel | None = None

    def json(self) -> Any:
        return None if self.body is None else self.body.model_dump(mode="json", exclude_none=True)


def model(cls: type[M]) -> Callable[[Any], M]:
    return cls.model_validate


def search_result(data: Any) -> SearchResult:
    reply = QueryReply.model_validate(data)
    return SearchResult(reply, Plan.model_validate(reply.plan) if reply.plan else None)


def failure(
    call: Call[Any], response: httpx.Response, url: httpx.URL, attempts: int = 1
) -> LycheeHTTPError:
    """The gateway's problem details as an error naming the URL the call went to (the base
    `url` and the call's path); a body that is not one (a proxy's page) becomes a problem
    naming the status."""
    try:
        problem = Problem.model_validate(response.json())
    except (ValueError, ValidationError):
        text = response.text[:300].strip() or response.reason_phrase
        problem = Problem(title=response.reason_phrase, status=response.status_code, detail=text)
    return LycheeHTTPError(
        call.method,
        call.path,
        response.status_code,
        problem,
        retry_after_s(response),
        attempts,
        url=_where(url, call),
    )


def read(call: Call[T], response: httpx.Response, url: httpx.URL) -> T:
    """A success's body read into the call's model, or an error naming what could not be
    read (pydantic's own would not say which request, nor that the gateway may be newer)."""
    try:
        return call.read(response.json())
    except ValueError as exc:  # not JSON, or not the model (a ValidationError)
        why = (
            str(ContractError.from_validation("reply", exc))
            if isinstance(exc, ValidationError)
            else f"not JSON: {exc}"
        )
        raise UnreadableReply(
            f"{call.method} {_where(url, call)}: {response.status_code}, but this client "
            f"cannot read its body ({why[:300]}); a gateway newer than the client may answer "
            "so: upgrade lychee-memory-client"
        ) from exc


def unreachable(call: Call[Any], url: httpx.URL, exc: httpx.TransportError) -> GatewayUnreachable:
    """No answer from the gateway at `url`, as an error naming it: sent and not answered in
    time (`GatewayTimedOut`), or not reached at all."""
    where = f"{call.method} {_where(url, call)}"
    if isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout):
        return GatewayTimedOut(f"{where}: sent, no answer within the client's timeout")
    return GatewayUnreachable(f"{where}: {exc!r}")


def closed(url: httpx.URL) -> ClientClosed:
    """A closed client's error: httpx's own would be a bare RuntimeError."""
    return ClientClosed(f"the client of {url} is closed (closed, or its with-block ended)")


def _where(url: httpx.URL, call: Call[Any]) -> str:
    return f"{str(url).rstrip('/')}{call.path}"


def name(value: str, what: str) -> str:
    """`value`, when it is a name the service takes (`schemas.base.Name`): checked before
    sending, as the README promises, not reported back as the gateway's 422."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    try:
        return check_name(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def gateway_url(url: str) -> str:
    """The gateway's address, refused now when it is not an http(s) URL with a host: without
    its scheme ("127.0.0.1:8080") every call would fail, each with a transport error."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"url: {url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(
            f"url: {url!r} is not an http:// or https:// address of the gateway "
            "(e.g. http://127.0.0.1:8080)"
        )
    return url.rstrip("/")


def segment(value: str, what: str) -> str:
    """`value` as one segment of a path, when it is a name: a "/" would change the route (a
    404 naming nothing), and every URL library resolves "." and ".." away, so `forget("..")`
    on a session would go out as the forget of its whole namespace."""
    return quote(name(value, what), safe="")


def _session_id(value: str | None) -> str | None:
    return None if value is None else name(value, "session_id")


def _ns(namespace: str) -> str:
    return f"/v1/namespaces/{segment(namespace, 'namespace')}"


def _session(namespace: str, session_id: str) -> str:
    return f"{_ns(namespace)}/sessions/{segment(session_id, 'session_id')}"


def _params(**values: str | int | bool | date | datetime | None) -> dict[str, str | int | bool]:
    out: dict[str, str | int | bool] = {}
    for name, value in values.items():
        if isinstance(value, date | datetime):
            out[name] = value.isoformat()
        elif value is not None:
            out[name] = value
    return out


def named(exchange: ExchangeIn) -> ExchangeIn:
    """The exchange with an id of its own: a retried add is then the same request again, which
    the gateway answers with the first receipt instead of adding the exchange twice."""
    if exchange.exchange_id is not None:
        return exchange
    return exchange.model_copy(update={"exchange_id": uuid.uuid4().hex})


def add(namespace: str, exchanges: Iterable[ExchangeIn | Mapping[str, Any]]) -> Call[Receipt]:
    items = [
        named(e if isinstance(e, ExchangeIn) else ExchangeIn.model_validate(e)) for e in exchanges
    ]
    return Call(
        "POST", f"{_ns(namespace)}/exchanges", model(Receipt), body=AddExchanges(exchanges=items)
    )


def adds(
    namespace: str,
    exchanges: Iterable[ExchangeIn | Mapping[str, Any]],
    *,
    max_exchanges: int = MAX_EXCHANGES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> list[Call[Receipt]]:
    """The exchanges, in order, as as few adds as the gateway's limits allow (none for none).
    Each exchange is named before it is measured, so a retried add is still answered with its
    first receipt."""
    calls: list[Call[Receipt]] = []
    group: list[ExchangeIn] = []
    size = _ENVELOPE_BYTES
    for e in exchanges:
        item = named(e if isinstance(e, ExchangeIn) else ExchangeIn.model_validate(e))
        grown = len(_body(item)) + 1  # and its comma
        if group and (len(group) == max_exchanges or size + grown > max_body_bytes):
            calls.append(add(namespace, group))
            group, size = [], _ENVELOPE_BYTES
        group.append(item)
        size += grown
    if group:
        calls.append(add(namespace, group))
    return calls


def _body(exchange: ExchangeIn) -> bytes:
    """An exchange's JSON as httpx writes a request body (compact UTF-8)."""
    data = exchange.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def merged(receipts: Sequence[Receipt]) -> Receipt:
    """One receipt for several adds of one namespace: each session's highest seq, every
    exchange; what `wait_indexed` waits for."""
    sessions: dict[str, SessionReceipt] = {}
    for receipt in receipts:
        for s in receipt.sessions:
            seen = sessions.get(s.session_id)
            sessions[s.session_id] = (
                s
                if seen is None
                else seen.model_copy(
                    update={
                        "last_seq": max(seen.last_seq, s.last_seq),
                        "offsets": [*seen.offsets, *s.offsets],
                    }
                )
            )
    return Receipt(
        namespace=receipts[0].namespace,
        sessions=list(sessions.values()),
        exchanges=[e for r in receipts for e in r.exchanges],
    )


def search(
    namespace: str,
    query: str,
    *,
    k: int = 10,
    session_id: str | None = None,
    answer: bool = False,
    wait_for: Receipt | None = None,
    timeout_s: float | None = None,
    token_budget: int | None = None,
) -> Call[SearchResult]:
    waited = (
        WaitFor.model_validate(wait_for.model_dump(mode="json")) if wait_for is not None else None
    )
    body = SearchIn(
        query=query,
        k=k,
        session_id=session_id,
        answer=answer,
        wait_for=waited,
        timeout_s=timeout_s,
        token_budget=token_budget,
    )
    return Call("POST", f"{_ns(namespace)}/search", search_result, body=body)


def listing(
    namespace: str,
    *,
    turns: bool,
    session_id: str | None = None,
    memory_type: str | None = None,
    since: date | None = None,
    page: int = 1,
    page_size: int = 50,
) -> Call[RecordsPage]:
    params = _params(
        session_id=_session_id(session_id),
        memory_type=memory_type,
        since=since,
        turns=turns,
        page=page,
        page_size=page_size,
    )
    return Call("GET", f"{_ns(namespace)}/records", model(RecordsPage), params=params)


def control(
    namespace: str, session_id: str, kind: str, after_seq: int | None
) -> Call[ControlReceipt]:
    body = ControlIn(after_seq=after_seq) if after_seq is not None else None
    return Call(
        "POST", f"{_session(namespace, session_id)}/{kind}", model(ControlReceipt), body=body
    )


def forget(namespace: str, session_id: str | None) -> Call[ForgetOut]:
    path = _session(namespace, session_id) if session_id is not None else _ns(namespace)
    return Call("DELETE", path, model(ForgetOut))


def status(namespace: str, session_id: str | None) -> Call[NamespaceStatus]:
    params = _params(session_id=_session_id(session_id))
    return Call("GET", f"{_ns(namespace)}/status", model(NamespaceStatus), params=params)


def dead_letters(
    topic: str | None, error_type: str | None, since: datetime | None
) -> Call[DeadLettersOut]:
    params = _params(topic=topic, error_type=error_type, since=since)
    return Call("GET", "/v1/dead-letters", model(DeadLettersOut), params=params)


def replay(body: ReplayIn) -> Call[ReplayOut]:
    return Call("POST", "/v1/dead-letters/replay", model(ReplayOut), body=body)


def indexed(receipt: Receipt, got: NamespaceStatus) -> bool:
    """Whether every session of `receipt` is indexed up to the receipt's last seq."""
    seen = {s.session_id: s.indexed_seq for s in got.sessions}
    return all(_seq(seen.get(s.session_id)) >= s.last_seq for s in receipt.sessions)


def _seq(value: int | None) -> int:
    return -1 if value is None else value
