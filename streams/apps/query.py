"""Query worker: `memory.queries` -> `memory.replies` (reply partition chosen by the client).

Concurrency above one is safe here: a lost query costs the client a timeout, never
data (faust-streaming issue 606 can commit past an in-flight message).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import faust
import openai
import orjson
import structlog

from schemas import QueryReply, QueryRequest
from schemas import topics as t
from streams import metrics
from streams.apps.base import make_app, raw_topic
from streams.factories import make_embedder, make_llm_client, open_store
from streams.guard import DeadLetters, Incoming, retry_transient
from streams.producer import KafkaPublisher
from streams.serde import SerdeError, decode, encode
from streams.settings import Settings
from workers.query.answer import LLMAnswerer
from workers.query.multiroute import RecallConfig
from workers.query.planner import HeuristicPlanner, Planner
from workers.query.rerank import load_reranker
from workers.query.service import QueryDeps, QueryService

log = structlog.get_logger("lychee.query")


def reply_target(value: bytes | None) -> tuple[str, int, str] | None:
    """Correlation id, reply partition and namespace of a request that failed validation."""
    try:
        data: Any = orjson.loads(value or b"")
        cid, part = data["correlation_id"], data["reply_partition"]
        if isinstance(cid, str) and cid and isinstance(part, int) and part >= 0:
            return cid, part, str(data.get("namespace", ""))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        pass
    return None


def make_planner(llm: tuple[openai.AsyncOpenAI, str] | None, timeout_s: float) -> Planner:
    """One LLM planning call when an LLM is configured, else the heuristic planner."""
    if llm is None:
        return HeuristicPlanner()
    from workers.query.planner.llm import LLMPlanner

    return LLMPlanner(
        *llm, policy=LLMPlanner.policy.with_(timeout_s=timeout_s), sleep=metrics.retry_sleep()
    )


class QueryHandler:
    """One request in, one reply out (or a dead letter when nobody can be answered)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.publisher = KafkaPublisher.from_settings(settings)
        self.dead = DeadLetters(self.publisher, "query")
        self._service: QueryService | None = None
        self._ready = asyncio.Lock()

    async def service(self) -> QueryService:
        async with self._ready:
            if self._service is None:
                await self.publisher.start()
                s = self.settings
                embedder = await asyncio.to_thread(make_embedder, s)
                llm = make_llm_client(s)
                deps = QueryDeps(
                    store=open_store(s, embedder),
                    embedder=embedder,
                    planner=make_planner(llm, s.llm_timeout_s),
                    answerer=LLMAnswerer(
                        *llm,
                        policy=LLMAnswerer.policy.with_(timeout_s=s.llm_timeout_s),
                        sleep=metrics.retry_sleep(),
                    )
                    if llm
                    else None,
                    reranker=await asyncio.to_thread(load_reranker, s.reranker_model),
                )
                self._service = QueryService(
                    deps,
                    RecallConfig(turn_window=s.turn_window),
                    rerank_candidates=s.reranker_candidates,
                    ablation=s.query_ablation,
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
        )

    async def serve(self, rec: Incoming) -> None:
        svc = await self.service()
        try:
            req = decode(rec.value, QueryRequest)
        except SerdeError as exc:
            target = reply_target(rec.value)
            if target is None:
                await self.dead.send(rec, exc.reason, exc.error_type)
                return
            cid, part, ns = target
            error = QueryReply(correlation_id=cid, namespace=ns, status="error", error=exc.reason)
            await self.reply(error, part)
            return
        remaining_s = req.deadline_ms / 1000 - time.time()
        if remaining_s <= 0:
            log.info("query.expired", correlation_id=req.correlation_id, late_s=-remaining_s)
            metrics.observe_reply("expired")
            return
        try:
            out = await asyncio.wait_for(svc.search(req), timeout=remaining_s)
        except TimeoutError:
            log.warning("query.deadline", correlation_id=req.correlation_id)
            metrics.observe_reply("deadline")
            return
        except Exception as exc:  # noqa: BLE001 - answer with the error, never silence
            log.error("query.failed", correlation_id=req.correlation_id, error=repr(exc))
            out = QueryReply(
                correlation_id=req.correlation_id, namespace=req.namespace, query=req.query,
                status="error", error=f"{type(exc).__name__}: {exc}",
            )  # fmt: skip
        await self.reply(out, req.reply_partition)


def build(settings: Settings) -> faust.App:
    app = make_app("query", settings, fetch_wait_ms=settings.query_fetch_wait_ms)
    handler = QueryHandler(settings)

    @app.agent(raw_topic(app, t.QUERIES), concurrency=settings.query_concurrency)
    async def answer(stream: faust.StreamT[bytes]) -> None:
        await handler.service()
        try:
            async for event in stream.events():
                try:
                    await handler.serve(Incoming.from_event(event))
                except Exception as exc:  # noqa: BLE001 - nothing escapes the agent loop
                    log.error("query.unhandled", error=repr(exc))
        finally:
            await handler.publisher.stop()

    return app
