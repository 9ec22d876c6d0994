"""What the console shows, read by the same service as every HTTP route:
the namespaces a caller may read, a namespace's sessions, a session's timeline, and the
stack's operations. Stores are read in threads, again at the latest versions when a forget
pruned the one a read was on; every list is cut to what the caller may see.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.errors import KafkaError
from redis.exceptions import RedisError

from schemas.gateway import (
    NamespacesOut,
    NamespaceSummary,
    OperationsOut,
    SessionsOut,
    SessionSummary,
    TimelineOut,
    TimelineSegment,
)
from streams.gateway.auth import Principal
from streams.gateway.errors import NotFound
from streams.gateway.service import MemoryService
from streams.status import collect, launcher_dir
from workers.encoder.service import read_usage
from workers.store.errors import TurnMissing
from workers.store.timeline import namespace_rows, session_rows, session_timeline

_NO_ROWS = {"sessions": 0, "turns": 0, "records": 0, "nodes": 0, "segments": 0}


async def namespaces(svc: MemoryService, principal: Principal) -> NamespacesOut:
    """Every namespace with rows or watermarks that the caller may read, by name."""
    store = await svc.client.store()
    rows = await asyncio.to_thread(store.read, namespace_rows, store.db)
    try:
        names = set(rows) | await svc.progress.namespaces()
        out = []
        for ns in sorted(n for n in names if principal.allows(n)):
            searchable, written = await svc.progress.overview(ns)
            counts = {**_NO_ROWS, **rows.get(ns, {})}
            out.append(
                NamespaceSummary(namespace=ns, last_write=written, searchable=searchable, **counts)
            )
    except RedisError as exc:
        raise svc.down(exc) from exc
    return NamespacesOut(namespaces=out)


async def sessions(svc: MemoryService, namespace: str) -> SessionsOut:
    """The namespace's sessions: rows from the store, progress from Redis."""
    store = await svc.client.store()
    rows = await asyncio.to_thread(store.read, session_rows, store.db, namespace)
    status = {s.session_id: s for s in (await svc.status(namespace)).sessions}
    out = []
    for sid in sorted(rows.keys() | status.keys()):
        row = rows.get(sid, {})
        st = status.get(sid)
        out.append(
            SessionSummary(
                session_id=sid,
                turns=row.get("turns", 0),
                segments=row.get("segments", 0),
                records=row.get("records", 0),
                first_seq=row.get("first_seq"),
                last_seq=row.get("last_seq"),
                first_date=row.get("first_date"),
                last_date=row.get("last_date"),
                last_seq_accepted=st.last_seq_accepted if st else None,
                indexed_seq=st.indexed_seq if st else None,
                open_segment_exchanges=st.open_segment_exchanges if st else 0,
                ended=st.ended if st else False,
                searchable=st.searchable if st else True,
            )
        )
    return SessionsOut(namespace=namespace, sessions=out)


async def timeline(
    svc: MemoryService,
    namespace: str,
    session_id: str,
    page: int,
    page_size: int,
    turn_id: str | None = None,
) -> TimelineOut:
    """A page of the session's turns, each with the segment it fell in, and those segments
    with their records; with `turn_id`, the page holding that turn."""
    store = await svc.client.store()
    try:
        got = await asyncio.to_thread(
            store.read, session_timeline, store.db, namespace, session_id, page, page_size, turn_id
        )
    except TurnMissing as exc:
        raise NotFound(str(exc), field="turn_id") from exc
    turns = [{k: v for k, v in t.items() if k != "namespace"} for t in got.turns]
    placed(turns, got.segments)
    status = (await svc.status(namespace, session_id)).sessions
    return TimelineOut(
        namespace=namespace,
        session_id=session_id,
        total=got.total,
        page=got.page,
        page_size=got.page_size,
        pages=got.pages,
        turns=turns,
        segments=[TimelineSegment(segment_id=s["id"], **s) for s in got.segments],
        open_segment_exchanges=status[0].open_segment_exchanges if status else 0,
    )


def placed(turns: list[dict[str, Any]], segments: list[dict[str, Any]]) -> None:
    """Each turn's `segment_id`: the segment whose seqs hold it. A turn that is not memory (an
    agent's tool item) is in no segment; it is shown with the turns around it, those before
    it first, so an exchange of tool items only does not read as waiting for a segment."""
    for t in turns:
        t["segment_id"] = _segment_of(int(t["seq"]), segments)
    for side in (turns, turns[::-1]):  # the segment of the turn before, else the one after
        shown: str | None = None
        for t in side:
            if t.get("memory") is False and t["segment_id"] is None:
                t["segment_id"] = shown
            shown = t["segment_id"] if t["segment_id"] is not None else shown


def _segment_of(seq: int, segments: list[dict[str, Any]]) -> str | None:
    """The first segment whose seqs hold `seq` (an exchange split into fragments spans
    several segments of one seq)."""
    for s in segments:
        if s["first_seq"] is not None and s["first_seq"] <= seq <= s["last_seq"]:
            return str(s["id"])
    return None


async def operations(svc: MemoryService, principal: Principal) -> OperationsOut:
    """Workers, lag, dead letters and row totals mix every namespace: only for a caller
    allowed all of them. Construction tokens are per namespace: the caller's own."""
    if principal.sees_all():
        settings = svc.settings
        try:
            report = await collect(settings, launcher_dir(settings))
        except (KafkaError, RedisError, TimeoutError) as exc:
            raise svc.down(exc) from exc
        usage: dict[str, dict[str, int]] = report["construction_tokens"]
        return OperationsOut(
            stack_wide=True,
            supervision=report["supervision"],
            stages=report["stages"],
            dead_letters=report["dead_letters"],
            rows=report["rows"],
            construction_tokens=usage,
        )
    try:
        usage = await read_usage(svc.redis)
    except RedisError as exc:
        raise svc.down(exc) from exc
    mine = {ns: u for ns, u in usage.items() if principal.allows(ns)}
    return OperationsOut(stack_wide=False, construction_tokens=mine)
