"""What the gateway does, shared by its HTTP routes and the MCP tools.

One `MemoryService` per process holds one `MemoryClient` (one producer, one reply partition
for every search), one Redis client, the seq allocator and the progress reader; it is made by
`streams.gateway.connection` once the stack answers. Callers check namespaces before they
call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, date, datetime
from functools import partial
from typing import Any

import structlog
from aiokafka.errors import KafkaError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from schemas import ControlKind, Exchange, QueryReply, SessionControl
from schemas.base import MAX_SEQ
from schemas.exchange import named_turns
from schemas.gateway import (
    ControlReceipt,
    ExchangeIn,
    ExchangeReceipt,
    ForgetOut,
    HistoryOut,
    NamespaceStatus,
    Receipt,
    RecordsPage,
    SearchIn,
    SessionReceipt,
    SessionStatus,
    WaitFor,
)
from streams import metrics
from streams.client import MemoryClient
from streams.client.memory import fitting
from streams.errors import (
    ForgetFailed,
    MessageTooLarge,
    QueryFailed,
    RecordMissing,
    ReplyTimeout,
    SeqRejected,
    SessionBusy,
    UnreadableReply,
)
from streams.gateway.accepted import content_digest, dated, default_exchange_id
from streams.gateway.errors import (
    Conflict,
    Invalid,
    NotFound,
    Timeout,
    TooLarge,
    Unavailable,
    UpstreamFailed,
    kafka_at,
    redis_at,
)
from streams.progress import Progress
from streams.seqs import Ack, Allocation, SeqAllocator, Wanted
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway")

_READY_TIMEOUT_S = 3.0


class MemoryService:
    def __init__(self, settings: Settings, client: MemoryClient, redis: Redis) -> None:
        self.settings = settings
        self.client = client
        self.redis = redis
        self.progress = Progress(redis)
        self.allocator = SeqAllocator(
            redis,
            ttl_s=settings.gateway.seq_ttl_s,
            lease_s=settings.gateway.produce_timeout_s + 5.0,
        )

    def down(self, exc: BaseException) -> Unavailable:
        """The error for a failed backend call, naming Kafka or Redis and where it is."""
        where = redis_at if isinstance(exc, RedisError) else kafka_at
        return Unavailable.backend(exc, where(self.settings))

    def _deadline(self, budget_s: float) -> float:
        return asyncio.get_running_loop().time() + budget_s

    # -- adding ---------------------------------------------------------------------------

    async def add(self, namespace: str, exchanges: Sequence[ExchangeIn]) -> Receipt:
        """Number, produce and confirm; returns once the broker acked every new exchange."""
        if len(exchanges) > self.settings.gateway.max_exchanges:
            raise TooLarge(
                f"{len(exchanges)} exchanges in one request; at most "
                f"{self.settings.gateway.max_exchanges}",
                field="exchanges",
            )
        exchanges = dated(exchanges, datetime.now(UTC))
        groups = _by_session(namespace, exchanges)
        self._fitting(namespace, exchanges, groups)
        deadline = self._deadline(self.settings.gateway.queue_timeout_s)
        try:
            return await self._add(namespace, exchanges, groups, deadline)
        except SessionBusy as exc:
            raise Unavailable(str(exc), retry_after_s=1.0) from exc
        except (RedisError, KafkaError) as exc:
            raise self.down(exc) from exc

    def _fitting(
        self,
        namespace: str,
        exchanges: Sequence[ExchangeIn],
        groups: dict[str, list[tuple[int, str]]],
    ) -> None:
        """Each exchange measured as the message the stages will read (with the largest seq):
        one over their limit is refused here, where the caller hears of it, not dead-lettered
        after its 202."""
        limit = self.settings.kafka.max_message_bytes
        for positions in groups.values():
            for i, eid in positions:
                largest = Allocation(eid, MAX_SEQ, False)
                try:
                    fitting(_exchange(namespace, exchanges[i], largest), limit)
                except MessageTooLarge as exc:
                    raise TooLarge(f"exchanges.{i}: {exc}", field=f"exchanges.{i}") from exc

    async def _add(
        self,
        namespace: str,
        exchanges: Sequence[ExchangeIn],
        groups: dict[str, list[tuple[int, str]]],
        deadline: float,
    ) -> Receipt:
        sessions = sorted(groups)  # one lock order for every request: no deadlock
        allocated: dict[int, Allocation] = {}
        sends: list[tuple[int, asyncio.Future[Any]]] = []
        resent: list[tuple[int, asyncio.Future[Any]]] = []
        async with contextlib.AsyncExitStack() as held:
            handles = {
                sid: await held.enter_async_context(
                    self.allocator.session(namespace, sid, deadline)
                )
                for sid in sessions
            }
            async with contextlib.AsyncExitStack() as ordered:
                for sid in sessions:
                    await ordered.enter_async_context(handles[sid].ordered())
                for sid in sessions:
                    wanted = [
                        Wanted(
                            eid,
                            exchanges[i].seq,
                            content_digest(exchanges[i]),
                            named_turns(eid, exchanges[i].turns),
                        )
                        for i, eid in groups[sid]
                    ]
                    try:
                        got = await handles[sid].allocate(wanted)
                    except SeqRejected as exc:
                        index = groups[sid][exc.index][0]
                        raise Conflict(
                            f"exchanges.{index}: {exc.describe()}",
                            field=f"exchanges.{index}.{exc.field}",
                        ) from exc
                    for (i, _), a in zip(groups[sid], got, strict=True):
                        allocated[i] = a
                # every session validated: only now is anything produced
                for sid in sessions:
                    for i, _ in groups[sid]:
                        a = allocated[i]
                        if not a.duplicate:
                            ex = _exchange(namespace, exchanges[i], a)
                            sent, again = await handles[sid].send_once(
                                a.exchange_id, partial(self.client.send, ex)
                            )
                            (resent if again else sends).append((i, sent))
            try:
                async with asyncio.timeout(self.settings.gateway.produce_timeout_s):
                    acked = await asyncio.gather(*(f for _, f in sends))
                    for i, sent in resent:  # another request's send: its receipt
                        meta, a = await sent, allocated[i]
                        allocated[i] = Allocation(
                            a.exchange_id, a.seq, True, meta.partition, meta.offset
                        )
            except TimeoutError as exc:
                raise Unavailable(
                    "the broker did not acknowledge in time; send the same request again "
                    "(an exchange id keeps its seq unless a later exchange of its session was "
                    "acknowledged meanwhile)",
                    retry_after_s=1.0,
                ) from exc
            acks: dict[str, list[Ack]] = defaultdict(list)
            for (i, _), meta in zip(sends, acked, strict=True):
                a = allocated[i]
                allocated[i] = Allocation(a.exchange_id, a.seq, False, meta.partition, meta.offset)
                digest = content_digest(exchanges[i])
                acks[exchanges[i].session_id].append(
                    Ack(a.exchange_id, a.seq, meta.partition, meta.offset, digest)
                )
            for sid, session_acks in acks.items():
                await handles[sid].confirm(session_acks)
        metrics.GATEWAY_EXCHANGES.labels("accepted").inc(len(sends))
        metrics.GATEWAY_EXCHANGES.labels("duplicate").inc(len(exchanges) - len(sends))
        return _receipt(namespace, exchanges, groups, allocated)

    async def control(
        self, kind: ControlKind, namespace: str, session_id: str, after_seq: int | None
    ) -> ControlReceipt:
        """Flush or end a session, ordered after every exchange produced for it before."""
        deadline = self._deadline(self.settings.gateway.queue_timeout_s)
        try:
            async with self.allocator.session(namespace, session_id, deadline) as s:
                async with s.ordered():
                    after = await s.last() if after_seq is None else after_seq
                    msg = SessionControl(
                        kind=kind, namespace=namespace, session_id=session_id, after_seq=after
                    )
                    fut = await self.client.send(msg)
                async with asyncio.timeout(self.settings.gateway.produce_timeout_s):
                    meta = await fut
        except SessionBusy as exc:
            raise Unavailable(str(exc), retry_after_s=1.0) from exc
        except (RedisError, KafkaError, TimeoutError) as exc:
            raise self.down(exc) from exc
        return ControlReceipt(
            namespace=namespace,
            session_id=session_id,
            kind=kind.value,
            after_seq=after,
            partition=meta.partition,
            offset=meta.offset,
        )

    # -- reading --------------------------------------------------------------------------

    async def search(self, namespace: str, req: SearchIn) -> QueryReply:
        budget = min(
            req.timeout_s or self.settings.query.default_timeout_s,
            self.settings.gateway.max_timeout_s,
        )
        deadline = time.monotonic() + budget
        if req.wait_for is not None:
            await self.wait_for(namespace, req.wait_for, deadline)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout(f"no time left to search within {budget:g}s", field="timeout_s")
        try:
            return await self.client.search(
                namespace,
                req.query,
                k=req.k,
                session_id=req.session_id,
                timeout_s=remaining,
                ablation=req.ablation,
                answer=req.answer,
                token_budget=req.token_budget,
            )
        except ReplyTimeout as exc:
            raise Timeout(f"the query service did not answer within {budget:g}s") from exc
        except (QueryFailed, UnreadableReply) as exc:
            raise UpstreamFailed(str(exc)) from exc
        except KafkaError as exc:
            raise self.down(exc) from exc

    async def wait_for(self, namespace: str, wait: WaitFor, deadline: float) -> None:
        """Return once every session of `wait` is indexed up to its seq (monotonic deadline)."""
        if wait.namespace is not None and wait.namespace != namespace:
            raise Invalid(
                f"the receipt is of namespace {wait.namespace!r}, not {namespace!r}",
                field="wait_for.namespace",
            )
        wanted: dict[str, int] = {}
        for s in wait.sessions:
            wanted[s.session_id] = max(wanted.get(s.session_id, -1), s.last_seq)
        try:
            accepted = await self.progress.accepted(namespace, list(wanted))
        except RedisError as exc:
            raise self.down(exc) from exc
        self._never_accepted(wait, accepted)
        delay = 0.01
        while True:
            try:
                indexed = await self.progress.indexed(namespace, list(wanted))
            except RedisError as exc:
                raise self.down(exc) from exc
            behind = {sid: seq for sid, seq in wanted.items() if indexed.get(sid, -1) < seq}
            if not behind:
                return
            if time.monotonic() + delay > deadline:
                where = "; ".join(
                    f"session {sid!r} to seq {seq}: "
                    + (f"indexed to seq {n}" if (n := indexed.get(sid, -1)) >= 0 else "none yet")
                    for sid, seq in sorted(behind.items())
                )
                raise Timeout(f"the receipt was not searchable in time: {where}", field="wait_for")
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.2)

    @staticmethod
    def _never_accepted(wait: WaitFor, accepted: dict[str, int]) -> None:
        """A seq past what the gateway accepted for its session would be waited for to the
        deadline: a receipt is written after its seqs are accepted, so it is not one. A session
        the gateway never accepted for (produced through Kafka) is waited for."""
        for i, s in enumerate(wait.sessions):
            top = accepted.get(s.session_id)
            if top is not None and s.last_seq > top:
                raise Invalid(
                    f"session {s.session_id!r} was accepted up to seq {top}, not "
                    f"{s.last_seq}: this is not a receipt of this namespace's adds",
                    field=f"wait_for.sessions.{i}.last_seq",
                )

    async def status(self, namespace: str, session_id: str | None = None) -> NamespaceStatus:
        try:
            found = await self.progress.namespace(namespace, session_id)
        except RedisError as exc:
            raise self.down(exc) from exc
        sessions = [
            SessionStatus(
                session_id=p.session_id,
                last_seq_accepted=p.accepted,
                segmented_seq=p.segmented,
                indexed_seq=p.indexed,
                open_segment_exchanges=p.open_exchanges,
                ended=p.ended,
                searchable=p.searchable,
            )
            for p in found
        ]
        return NamespaceStatus(
            namespace=namespace, sessions=sessions, searchable=all(s.searchable for s in sessions)
        )

    # -- forgetting and listing -------------------------------------------------------------

    async def forget(self, namespace: str, session_id: str | None = None) -> ForgetOut:
        """Forget in every stage; returns once all confirmed (bounded by the forget timeout)."""
        try:
            receipt = await self.client.forget(namespace, session_id)
        except ReplyTimeout as exc:
            raise Timeout(f"not every stage confirmed the forget: {exc}") from exc
        except ForgetFailed as exc:
            raise UpstreamFailed(str(exc)) from exc
        except KafkaError as exc:
            raise self.down(exc) from exc
        return ForgetOut.model_validate(receipt.as_dict())

    async def records(
        self,
        namespace: str,
        session_id: str | None = None,
        memory_type: str | None = None,
        since: date | None = None,
        turns: bool = False,
        page: int = 1,
        page_size: int = 50,
    ) -> RecordsPage:
        try:
            if turns:
                got = await self.client.list_turns(namespace, session_id, page, page_size)
            else:
                got = await self.client.list_records(
                    namespace, session_id, memory_type, since, page, page_size
                )
        except ValueError as exc:
            raise Invalid(str(exc)) from exc
        items = [{k: v for k, v in item.items() if k != "namespace"} for item in got.items]
        return RecordsPage(
            namespace=namespace,
            kind="turns" if turns else "records",
            total=got.total,
            page=got.page,
            page_size=got.page_size,
            pages=got.pages,
            items=items,
        )

    async def history(self, namespace: str, record_id: str | None = None) -> HistoryOut:
        """What replaced what and the open conflicts (`workers.store.history`); a record id
        the namespace does not hold is a 404, not an empty history. A namespace with nothing
        stored has an empty history, as its records and status are empty."""
        try:
            found = await self.client.history(namespace, record_id)
        except RecordMissing as exc:
            raise NotFound(str(exc), field="record_id") from exc
        return HistoryOut(
            namespace=namespace,
            record_id=record_id,
            supersessions=[asdict(c) for c in found.supersessions],
            conflicts=[asdict(c) for c in found.conflicts],
        )

    async def readiness(self) -> dict[str, str]:
        """`ok` or the error, for the broker, Redis and LanceDB, checked at once."""

        async def broker() -> None:
            await self.client.producer.client.fetch_all_metadata()

        async def redis() -> None:
            await self.redis.ping()

        def list_tables() -> None:
            import lancedb as ldb  # in the thread: a first import takes seconds

            ldb.connect(self.settings.store.uri).list_tables()

        async def lancedb() -> None:
            await asyncio.to_thread(list_tables)

        async def check(fn: Any) -> str:
            try:
                async with asyncio.timeout(_READY_TIMEOUT_S):
                    await fn()
                return "ok"
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

        results = await asyncio.gather(check(broker), check(redis), check(lancedb))
        return dict(zip(("broker", "redis", "lancedb"), results, strict=True))


def _by_session(
    namespace: str, exchanges: Sequence[ExchangeIn]
) -> dict[str, list[tuple[int, str]]]:
    """Request positions and exchange ids per session, checked for what the path decides."""
    groups: dict[str, list[tuple[int, str]]] = defaultdict(list)
    seen: dict[tuple[str, str], int] = {}
    for i, ex in enumerate(exchanges):
        if ex.namespace is not None and ex.namespace != namespace:
            raise Invalid(
                f"exchanges.{i}.namespace is {ex.namespace!r}, the path says {namespace!r}",
                field=f"exchanges.{i}.namespace",
            )
        eid = ex.exchange_id or default_exchange_id(ex)
        if (ex.session_id, eid) in seen:
            raise Invalid(
                f"exchanges.{i}.exchange_id repeats exchanges.{seen[ex.session_id, eid]}",
                field=f"exchanges.{i}.exchange_id",
            )
        seen[ex.session_id, eid] = i
        groups[ex.session_id].append((i, eid))
    return groups


def _exchange(namespace: str, ex: ExchangeIn, a: Allocation) -> Exchange:
    return Exchange(
        namespace=namespace,
        session_id=ex.session_id,
        seq=a.seq,
        exchange_id=a.exchange_id,
        turns=ex.turns,
        session_date=ex.session_date,
        metadata=ex.metadata,
    )


def _receipt(
    namespace: str,
    exchanges: Sequence[ExchangeIn],
    groups: dict[str, list[tuple[int, str]]],
    allocated: dict[int, Allocation],
) -> Receipt:
    items = []
    for i in range(len(exchanges)):
        a = allocated[i]
        assert a.partition is not None and a.offset is not None
        items.append(
            ExchangeReceipt(
                exchange_id=a.exchange_id,
                session_id=exchanges[i].session_id,
                seq=a.seq,
                partition=a.partition,
                offset=a.offset,
                duplicate=a.duplicate,
            )
        )
    sessions = []
    for sid in sorted(groups):
        mine = [items[i] for i, _ in groups[sid]]
        sessions.append(
            SessionReceipt(
                session_id=sid,
                last_seq=max(x.seq for x in mine),
                partition=mine[-1].partition,
                offsets=[x.offset for x in mine],
            )
        )
    return Receipt(namespace=namespace, sessions=sessions, exchanges=items)
