"""Read-only routes over several namespaces or a whole session, for the console and any
other client: who the caller is, the namespaces it may read, a namespace's sessions,
a session's timeline, the stack's operations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from schemas.gateway import (
    NamespacesOut,
    OperationsOut,
    Problem,
    SessionsOut,
    TimelineOut,
    WhoAmI,
)
from streams.gateway import browse
from streams.gateway.deps import AuthorizedNamespace, Caller, KnownQuery, Service, SessionId

router = APIRouter(
    prefix="/v1",
    dependencies=[KnownQuery],
    responses={code: {"model": Problem} for code in (401, 403, 422, 503)},
)


@router.get("/whoami", response_model=WhoAmI)
async def whoami(principal: Caller) -> WhoAmI:
    """The caller: its key's name and namespace patterns (all, without keys)."""
    ns = list(principal.namespaces) if principal.namespaces is not None else None
    return WhoAmI(name=principal.name, namespaces=ns, keys_required=ns is not None)


@router.get("/namespaces", response_model=NamespacesOut)
async def list_namespaces(principal: Caller, svc: Service) -> NamespacesOut:
    """The namespaces this key may read, with their rows, last write and whether everything
    accepted is searchable."""
    return await browse.namespaces(svc, principal)


@router.get("/namespaces/{namespace}/sessions", response_model=SessionsOut)
async def list_sessions(namespace: AuthorizedNamespace, svc: Service) -> SessionsOut:
    """The namespace's sessions: turns, segments, records, progress."""
    return await browse.sessions(svc, namespace)


@router.get("/namespaces/{namespace}/sessions/{session_id}/timeline", response_model=TimelineOut)
async def session_timeline(
    namespace: AuthorizedNamespace,
    session_id: SessionId,
    svc: Service,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1, le=500)] = 100,
    turn_id: Annotated[
        str | None, Query(max_length=200, description="open the page holding this turn")
    ] = None,
) -> TimelineOut:
    """The session's raw turns a page at a time, the segments they fall in (finalize reason,
    boundary signals) and each segment's records with the turns they came from."""
    return await browse.timeline(svc, namespace, session_id, page, page_size, turn_id)


@router.get("/operations", response_model=OperationsOut)
async def operations(principal: Caller, svc: Service) -> OperationsOut:
    """Workers and restarts, lag per stage, dead letters per topic, rows (for a key allowed
    every namespace), and construction tokens per namespace the key may read."""
    return await browse.operations(svc, principal)
