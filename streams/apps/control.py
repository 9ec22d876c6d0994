"""Each stage's agent on `memory.control`: apply a forget, answer with its receipt part.

Every stage reads `memory.control` in its own consumer group, so each sees every forget.
A bad control message is dead-lettered like any input; a forget that fails for good still
answers (with `error` set) before it is dead-lettered, so the client does not wait in vain.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import faust
import structlog
from redis.asyncio import Redis

from schemas import ForgetReceipt, ForgetRequest
from schemas import topics as t
from streams.apps.base import raw_topic, take_events
from streams.kafka.guard import DeadLetters, Incoming, TransientPolicy, run_guarded
from streams.kafka.lag import LagReader
from streams.kafka.pauses import describe
from streams.kafka.producer import KafkaPublisher
from streams.kafka.rules import is_transient
from streams.kafka.serde import decode, encode
from streams.settings import Settings
from workers.forget import rewrite_aof

log = structlog.get_logger("lychee.control")


@dataclass
class Applied:
    """What one stage removed for a forget."""

    redis_keys_removed: int = 0
    rows_removed: dict[str, int] = field(default_factory=dict)
    rows_updated: dict[str, int] = field(default_factory=dict)
    versions_pruned: int = 0


def forget_agent(
    app: faust.App,
    stage: str,
    settings: Settings,
    publisher: KafkaPublisher,
    dead: DeadLetters,
    redis: Redis,
    apply: Callable[[ForgetRequest], Awaitable[Applied]],
) -> None:
    policy = TransientPolicy.from_settings(settings)

    async def reply(receipt: ForgetReceipt, req: ForgetRequest) -> None:
        if req.reply_partition is None:
            return
        if req.reply_partition not in await publisher.partitions(t.REPLIES):
            log.warning(
                "forget.receipt_unsent",
                forget_id=req.forget_id,
                reason=f"reply_partition {req.reply_partition} is not a partition of {t.REPLIES}",
            )
            return
        await publisher.send_raw(
            t.REPLIES, encode(receipt), req.forget_id.encode(), partition=req.reply_partition
        )

    async def handle(requests: Sequence[ForgetRequest]) -> None:
        for req in requests:
            started = time.perf_counter()
            try:
                done = await apply(await within_the_log(req, settings.kafka.bootstrap))
                # the removed keys' values must leave the append-only file too
                await rewrite_aof(redis, settings.kafka.request_timeout_s)
            except Exception as exc:
                if not is_transient(exc):
                    await reply(_receipt(req, stage, Applied(), started, describe(exc, 500)), req)
                raise
            receipt = _receipt(req, stage, done, started)
            log.info(
                "forget.applied",
                stage=stage,
                namespace=req.namespace,
                session_id=req.session_id,
                forget_id=req.forget_id,
                keys=done.redis_keys_removed,
                rows=done.rows_removed,
            )
            await reply(receipt, req)

    @app.agent(raw_topic(app, t.CONTROL), concurrency=1)
    async def control(stream: faust.StreamT[bytes]) -> None:
        async for events in take_events(stream, 16, 0.2):
            records = [Incoming.from_event(e) for e in events]
            await run_guarded(
                f"{stage}-control",
                records,
                lambda r: decode(r.value, ForgetRequest, settings.kafka.max_message_bytes),
                handle,
                dead,
                policy=policy,
            )


async def within_the_log(req: ForgetRequest, bootstrap: str) -> ForgetRequest:
    """`req` with its end offsets no further than `memory.exchanges` reaches now: a forget
    fences what was produced before it, and an offset past the log's end (a foreign client's,
    up to 2^63) would fence every exchange the namespace ever sends again."""
    async with LagReader(bootstrap) as lag:
        ends = {tp.partition: end for tp, end in (await lag.end_offsets(t.EXCHANGES)).items()}
    clamped = {p: min(end, ends[p]) for p, end in req.exchanges_end.items() if p in ends}
    if clamped == req.exchanges_end:
        return req
    log.warning("forget.clamped", forget_id=req.forget_id, asked=req.exchanges_end, log=ends)
    return req.model_copy(update={"exchanges_end": clamped})


def _receipt(
    req: ForgetRequest, stage: str, done: Applied, started: float, error: str = ""
) -> ForgetReceipt:
    return ForgetReceipt(
        forget_id=req.forget_id,
        stage=stage,
        namespace=req.namespace,
        session_id=req.session_id,
        rows_removed=done.rows_removed,
        rows_updated=done.rows_updated,
        redis_keys_removed=done.redis_keys_removed,
        versions_pruned=done.versions_pruned,
        elapsed_s=round(time.perf_counter() - started, 3),
        error=error,
    )
