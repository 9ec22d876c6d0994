"""Query worker: `memory.queries` -> `memory.replies` (reply partition chosen by the client).

Concurrency above one is safe here: a lost query costs the client a timeout, never
data (faust-streaming issue 606 can commit past an in-flight message). The searches run in
query processes (`streams.apps.query_processes`) unless `query.processes` is 1.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import faust
import orjson
import structlog

from schemas import QueryReply, QueryRequest
from schemas import topics as t
from schemas.query import CORRELATION_ID_MAX_CHARS
from streams import metrics
from streams.apps.base import make_app, raw_topic, stage_outputs
from streams.apps.query_processes import EncodedReply, QueryFailed, QueryProcesses, process_count
from streams.kafka.errors import SerdeError
from streams.kafka.fetch import COVERED, UNDECODABLE
from streams.kafka.guard import DeadLetters, Incoming, TransientPolicy, retry_transient
from streams.kafka.pauses import describe
from streams.kafka.producer import KafkaPublisher
from streams.kafka.rules import INTERNAL
from streams.kafka.serde import TOO_LARGE, decode
from streams.settings import Settings
from workers import telemetry

if TYPE_CHECKING:
    from workers.query.service import QueryService

log = structlog.get_logger("lychee.query")

REPLY_PARTITION = "reply_partition"  # dead-letter reason code: no partition to answer on


def reply_target(value: bytes | None) -> tuple[str, int, str] | None:
    """Correlation id, reply partition and namespace of a request that failed validation,
    when they can be read (the partition is checked against the topic by the caller)."""
    try:
        data: Any = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    cid, part, ns = data.get("correlation_id"), data.get("reply_partition"), data.get("namespace")
    if not (isinstance(cid, str) and 0 < len(cid) <= CORRELATION_ID_MAX_CHARS):
        return None
    if not isinstance(part, int) or isinstance(part, bool) or part < 0:
        return None
    return cid, part, ns if isinstance(ns, str) and len(ns) <= 128 else ""


class InProcess:
    """The service in the worker's own process (`query.processes` = 1)."""

    def __init__(self, service: QueryService) -> None:
        self.service = service
        self.model_name = service.recall.embedder.model_name

    async def search(self, req: QueryRequest, timeout_s: float) -> EncodedReply:
        reply = await asyncio.wait_for(self.service.search(req), timeout=timeout_s)
        return EncodedReply.of(reply)


Searcher = InProcess | QueryProcesses


class QueryHandler:
    """One request in, one reply out: an answer, an error reply naming the problem, or (when
    nobody can be answered) a dead letter with the reason. Never silence, but for a request
    past its deadline, which is dropped and logged."""

    def __init__(self, settings: Settings, publisher: KafkaPublisher, dead: DeadLetters) -> None:
        self.settings = settings
        self.publisher = publisher
        self.dead = dead
        self.policy = TransientPolicy.from_settings(settings)
        self._searcher: Searcher | None = None
        self._ready = asyncio.Lock()

    async def searcher(self) -> Searcher:
        """The service, in this process or in query processes (`query.processes`)."""
        async with self._ready:
            if self._searcher is None:
                count = process_count(self.settings)
                if count == 1:
                    # imported here: a worker whose processes answer needs no store or model
                    from streams.apps.query_service import build_service

                    self._searcher = InProcess(await build_service(self.settings))
                else:
                    processes = QueryProcesses(self.settings, count)
                    await processes.start()
                    self._searcher = processes
                log.info("query.ready", model=self._searcher.model_name, processes=count)
        return self._searcher

    async def reply(self, msg: EncodedReply, partition: int) -> None:
        metrics.observe_reply(msg.status, msg.timings_ms)
        await retry_transient(
            lambda: self.publisher.send_raw(
                t.REPLIES, msg.data, msg.correlation_id.encode(), partition
            ),
            what="reply",
            policy=self.policy,
        )

    async def partition_problem(self, partition: int) -> str | None:
        """Why `partition` cannot take a reply (aiokafka would assert), or None."""
        parts = await retry_transient(
            lambda: self.publisher.partitions(t.REPLIES), what="reply metadata", policy=self.policy
        )
        if partition in parts:
            return None
        return (
            f"reply_partition {partition} is out of range: {t.REPLIES} has {len(parts)} "
            f"partitions (0-{max(parts, default=0)})"
        )

    async def refuse(self, rec: Incoming, reason: str, error_type: str) -> None:
        """An error reply when the request says where to send one, else a dead letter."""
        target = reply_target(rec.value) if error_type != TOO_LARGE else None
        if target is not None:
            cid, part, ns = target
            problem = await self.partition_problem(part)
            if problem is None:
                error = QueryReply(correlation_id=cid, namespace=ns, status="error", error=reason)
                await self.reply(EncodedReply.of(error), part)
                return
            reason = f"{reason}; no reply possible: {problem}"
        await self.dead.send(rec, reason, error_type)

    async def serve(self, rec: Incoming) -> None:
        searcher = await self.searcher()
        if rec.undecodable is not None:
            if rec.undecodable != COVERED:
                await self.dead.send(rec, rec.undecodable, UNDECODABLE)
            return
        try:
            req = decode(rec.value, QueryRequest, self.settings.kafka.max_message_bytes)
        except SerdeError as exc:
            await self.refuse(rec, exc.reason, exc.error_type)
            return
        if problem := await self.partition_problem(req.reply_partition):
            await self.dead.send(rec, problem, REPLY_PARTITION)
            return
        remaining_s = req.deadline_ms / 1000 - time.time()
        if remaining_s <= 0:
            log.info("query.expired", correlation_id=req.correlation_id, late_s=-remaining_s)
            metrics.observe_reply("expired")
            return
        if remaining_s > self.settings.query.max_deadline_s:
            error = (
                f"deadline_ms is {remaining_s:.0f}s ahead; at most "
                f"{self.settings.query.max_deadline_s:.0f}s (query_max_deadline_s) allowed"
            )
            await self.reply(self._error(req, error), req.reply_partition)
            return
        try:
            out = await searcher.search(req, remaining_s)
        except TimeoutError:
            log.warning("query.deadline", correlation_id=req.correlation_id)
            metrics.observe_reply("deadline")
            return
        except QueryFailed as exc:  # in a query process: its text names what raised there
            log.error("query.failed", correlation_id=req.correlation_id, error=str(exc))
            out = self._error(req, str(exc))
        except Exception as exc:  # noqa: BLE001 - answer with the error, never silence
            log.error("query.failed", correlation_id=req.correlation_id, error=repr(exc))
            out = self._error(req, f"{type(exc).__name__}: {exc}")
        await self.reply(out, req.reply_partition)

    @staticmethod
    def _error(req: QueryRequest, error: str) -> EncodedReply:
        return EncodedReply.of(
            QueryReply(
                correlation_id=req.correlation_id,
                namespace=req.namespace,
                query=req.query,
                status="error",
                error=error,
            )
        )


def build(settings: Settings) -> faust.App:
    app = make_app("query", settings, fetch_wait_ms=settings.kafka.query_fetch_wait_ms)
    # a reply is sent alone and awaited: at once, not after a linger
    handler = QueryHandler(settings, *stage_outputs(app, "query", settings, linger_ms=0))

    @app.agent(raw_topic(app, t.QUERIES), concurrency=settings.query.concurrency)
    async def answer(stream: faust.StreamT[bytes]) -> None:
        await handler.searcher()
        async for event in stream.events():
            rec = Incoming.from_event(event)
            try:
                with telemetry.consumed(t.QUERIES, rec.headers, rec.partition, rec.offset):
                    await handler.serve(rec)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - nothing escapes the agent loop
                log.error("query.unhandled", error=describe(exc, 500))
                await handler.dead.send(rec, f"internal error: {describe(exc)}", INTERNAL)

    return app
