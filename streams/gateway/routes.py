"""The REST routes of one namespace: add exchanges, flush and end sessions, search, list
records and their history, forget, status.

Every `/v1/namespaces/{namespace}/...` route takes the namespace through one dependency,
`AuthorizedNamespace` (streams.gateway.deps), which checks that the key may use the
namespace (403); `EdgeGuard` authenticated the key (401) and checked the body's type and, without
keys, the origin of a write, before the body was read. A new route gets both by declaring
`namespace: AuthorizedNamespace`.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from schemas import ControlKind, QueryReply
from schemas.base import Name
from schemas.gateway import (
    AddExchanges,
    ControlIn,
    ControlReceipt,
    ForgetOut,
    HistoryOut,
    NamespaceStatus,
    Problem,
    Receipt,
    RecordsPage,
    SearchIn,
)
from schemas.records import MemoryType
from streams.gateway.deps import AuthorizedNamespace, KnownQuery, Service, SessionId
from streams.gateway.problems import PROBLEM

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {PROBLEM: {}}} for code in (401, 403, 422, 503)
}
router = APIRouter(
    prefix="/v1/namespaces/{namespace}", responses=_PROBLEMS, dependencies=[KnownQuery]
)


@router.post(
    "/exchanges",
    status_code=202,
    response_model=Receipt,
    responses={409: {"model": Problem}, 413: {"model": Problem}},
)
async def add_exchanges(
    namespace: AuthorizedNamespace, body: AddExchanges, svc: Service
) -> Receipt:
    """Add one or many exchanges; 202 with a receipt once the broker acked them.

    Re-sending an exchange id returns its first receipt (`duplicate: true`) and adds nothing.
    Without `seq` the gateway numbers each session's exchanges in arrival order.
    """
    return await svc.add(namespace, body.exchanges)


@router.post("/sessions/{session_id}/flush", status_code=202, response_model=ControlReceipt)
async def flush_session(
    namespace: AuthorizedNamespace,
    session_id: SessionId,
    svc: Service,
    body: ControlIn | None = None,
) -> ControlReceipt:
    """Close the session's open segment now, so that it is consolidated into records."""
    after = body.after_seq if body else None
    return await svc.control(ControlKind.flush, namespace, session_id, after)


@router.post("/sessions/{session_id}/end", status_code=202, response_model=ControlReceipt)
async def end_session(
    namespace: AuthorizedNamespace,
    session_id: SessionId,
    svc: Service,
    body: ControlIn | None = None,
) -> ControlReceipt:
    """Close the open segment and end the session (its segmenter state is dropped)."""
    after = body.after_seq if body else None
    return await svc.control(ControlKind.end_session, namespace, session_id, after)


@router.post(
    "/search",
    response_model=QueryReply,
    responses={502: {"model": Problem}, 504: {"model": Problem}},
)
async def search(namespace: AuthorizedNamespace, body: SearchIn, svc: Service) -> QueryReply:
    """Evidence for a question through the request/reply topics; with `wait_for` (a receipt),
    only once that receipt is searchable (bounded by `timeout_s`)."""
    return await svc.search(namespace, body)


@router.get("/records", response_model=RecordsPage)
async def list_records(
    namespace: AuthorizedNamespace,
    svc: Service,
    session_id: Annotated[Name | None, Query(description="one session only")] = None,
    memory_type: Annotated[MemoryType | None, Query(description="one memory type only")] = None,
    since: Annotated[date | None, Query(description="records from this day on")] = None,
    turns: Annotated[bool, Query(description="raw turns instead of records")] = False,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RecordsPage:
    """What is remembered about the namespace (or one session), oldest first, a page at a
    time: memory records, or the raw turns with `turns=true`."""
    kind = memory_type.value if memory_type else None
    return await svc.records(namespace, session_id, kind, since, turns, page, page_size)


@router.get("/history", response_model=HistoryOut, responses={404: {"model": Problem}})
async def history(
    namespace: AuthorizedNamespace,
    svc: Service,
    record_id: Annotated[
        str | None, Query(max_length=200, description="one record's history only")
    ] = None,
) -> HistoryOut:
    """What replaced what in the namespace (when, from which turns, found by which rule or
    model) and the conflicts nothing settled; the older records are all still there. A
    `record_id` the namespace does not hold is a 404."""
    return await svc.history(namespace, record_id)


@router.delete(
    "/sessions/{session_id}",
    response_model=ForgetOut,
    responses={502: {"model": Problem}, 504: {"model": Problem}},
)
async def forget_session(
    namespace: AuthorizedNamespace, session_id: SessionId, svc: Service
) -> ForgetOut:
    """Forget one session everywhere (its turns, the records only it supports, their links,
    its state); returns the receipt once every stage confirmed."""
    return await svc.forget(namespace, session_id)


@router.delete(
    "", response_model=ForgetOut, responses={502: {"model": Problem}, 504: {"model": Problem}}
)
async def forget_namespace(namespace: AuthorizedNamespace, svc: Service) -> ForgetOut:
    """Forget the whole namespace everywhere; returns the receipt once every stage confirmed."""
    return await svc.forget(namespace)


@router.get("/status", response_model=NamespaceStatus)
async def status(
    namespace: AuthorizedNamespace,
    svc: Service,
    session_id: Annotated[Name | None, Query(description="one session only")] = None,
) -> NamespaceStatus:
    """Per session: the last seq accepted, segmented and indexed, and whether all accepted is
    searchable."""
    return await svc.status(namespace, session_id)
