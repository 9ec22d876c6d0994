"""Query worker: `memory.queries` -> `memory.replies` (reply partition chosen by the client).

Concurrency above one is safe here: a lost query costs the client a timeout, never
data (faust-streaming issue 606 can commit past an in-flight message).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

import faust
import orjson
import structlog
from redis.asyncio import Redis

from schemas import QueryReply, QueryRequest
from schemas import topics as t
from schemas.query import CORRELATION_ID_MAX_CHARS
from streams import metrics
from streams.apps.base import make_app, raw_topic, stage_outputs
from streams.factories import (
    adapter_of,
    llm_caller_options,
    make_embedder,
    make_llm_client,
    make_planner,
    open_store,
    recall_config,
    scorer_of,
)
from streams.kafka.errors import SerdeError
from streams.kafka.fetch import COVERED, UNDECODABLE
from streams.kafka.guard import DeadLetters, Incoming, TransientPolicy, retry_transient
from streams.kafka.pauses import describe
from streams.kafka.producer import KafkaPublisher
from streams.kafka.rules import INTERNAL
from streams.kafka.serde import TOO_LARGE, decode, encode
from streams.settings import Settings
from streams.written import WrittenVersions
from workers import telemetry
from workers.query.answer import LLMAnswerer
from workers.query.presets import preset_for
from workers.query.rerank import load_reranker
from workers.query.service import QueryDeps, QueryService
from workers.store import TABLES

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


def _redis(settings: Settings) -> Redis:
    """Read once a request, beside the searches: a slow Redis must not hold them long."""
    return Redis.from_url(settings.redis.url, socket_timeout=1, socket_connect_timeout=1)


class QueryHandler:
    """One request in, one reply out: an answer, an error reply naming the problem, or (when
    nobody can be answered) a dead letter with the reason. Never silence, but for a request
    past its deadline, which is dropped and logged."""

    def __init__(self, settings: Settings, publisher: KafkaPublisher, dead: DeadLetters) -> None:
        self.settings = settings
        self.publisher = publisher
        self.dead = dead
        self.policy = TransientPolicy.from_settings(settings)
        self._service: QueryService | None = None
        self._ready = asyncio.Lock()

    async def service(self) -> QueryService:
        async with self._ready:
            if self._service is None:
                s = self.settings
                embedder = await asyncio.to_thread(make_embedder, s)
                llm = make_llm_client(s)
                deps = QueryDeps(
                    store=open_store(s, embedder, snapshots=True),
                    embedder=embedder,
                    planner=make_planner(llm, s),
                    answerer=LLMAnswerer(
                        *llm,
                        **llm_caller_options(s, LLMAnswerer.policy),
                        observer=metrics.LLM_OBSERVER,
                    )
                    if llm
                    else None,
                    reranker=await asyncio.to_thread(load_reranker, s.query.reranker_model),
                    scorer=scorer_of(s),
                    adapter=await asyncio.to_thread(adapter_of, s, embedder),
                    written=partial(WrittenVersions(_redis(s)).of, tables=TABLES),
                )
                # off the loop: the service loads the token counter's tables as it starts
                self._service = await asyncio.to_thread(
                    QueryService,
                    deps,
                    recall_config(s),
                    rerank_candidates=s.query.reranker_candidates,
                    preset=preset_for(s.query.ablation),
                )
                log.info("query.ready", model=embedder.model_name)
        return self._service

    async def reply(self, msg: QueryReply, partition: int) -> None:
        metrics.observe_reply(msg.status, msg.timings_ms)
        await retry_transient(
            lambda: self.publisher.send_raw(
                t.REPLIES, encode(msg), msg.correlation_id.encode(), partition
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
                await self.reply(error, part)
                return
            reason = f"{reason}; no reply possible: {problem}"
        await self.dead.send(rec, reason, error_type)

    async def serve(self, rec: Incoming) -> None:
        svc = await self.service()
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
            out = await asyncio.wait_for(svc.search(req), timeout=remaining_s)
        except TimeoutError:
            log.warning("query.deadline", correlation_id=req.correlation_id)
            metrics.observe_reply("deadline")
            return
        except Exception as exc:  # noqa: BLE001 - answer with the error, never silence
            log.error("query.failed", correlation_id=req.correlation_id, error=repr(exc))
            out = self._error(req, f"{type(exc).__name__}: {exc}")
        await self.reply(out, req.reply_partition)

    @staticmethod
    def _error(req: QueryRequest, error: str) -> QueryReply:
        return QueryReply(
            correlation_id=req.correlation_id,
            namespace=req.namespace,
            query=req.query,
            status="error",
            error=error,
        )


def build(settings: Settings) -> faust.App:
    app = make_app("query", settings, fetch_wait_ms=settings.kafka.query_fetch_wait_ms)
    # a reply is sent alone and awaited: at once, not after a linger
    handler = QueryHandler(settings, *stage_outputs(app, "query", settings, linger_ms=0))

    @app.agent(raw_topic(app, t.QUERIES), concurrency=settings.query.concurrency)
    async def answer(stream: faust.StreamT[bytes]) -> None:
        await handler.service()
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
