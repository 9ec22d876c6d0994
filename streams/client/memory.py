"""The client: produce exchanges, flush sessions, search through request/reply.

Replies come back on `memory.replies`, on one partition per client that the client
reads by assignment (no consumer group), matched to requests by correlation id. One
request spends one time budget on producing and waiting (STYLE 7).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaConnectionError
from aiokafka.structs import RecordMetadata
from opentelemetry.trace import SpanKind
from redis.asyncio import Redis

from schemas import (
    ControlKind,
    Exchange,
    ExchangeTopicMessage,
    ForgetRequest,
    QueryReply,
    QueryRequest,
    SessionControl,
)
from schemas import topics as t
from schemas.control import FORGET_STAGES
from streams.client.receipts import ForgetWait, Receipt, receipt_part
from streams.errors import (
    BrokerUnreachable,
    ForgetFailed,
    MessageTooLarge,
    QueryFailed,
    RecordMissing,
    ReplyTimeout,
    StoreMissing,
    UnreadableReply,
)
from streams.kafka import fetch
from streams.kafka.errors import SerdeError
from streams.kafka.lag import LagReader
from streams.kafka.producer import send_traced, start_producer
from streams.kafka.serde import decode, encode
from streams.progress import Progress
from streams.settings import Settings
from streams.stack.endpoints import client_settings
from workers import telemetry
from workers.encoder.service import read_usage

if TYPE_CHECKING:  # LanceDB is imported on first listing: a client that only talks is quick
    from workers.store import EvidenceStore
    from workers.store.listing import Page

log = structlog.get_logger("lychee.client")


class MemoryClient:
    def __init__(self, settings: Settings | None = None) -> None:
        """`settings` default: the LYCHEE_* environment, or the running `lychee up` when it
        sets no connection variable (streams.stack.endpoints)."""
        self.settings = settings or client_settings()
        self.producer: AIOKafkaProducer
        self.replies: AIOKafkaConsumer
        self.reply_partition = -1
        self._pending: dict[str, asyncio.Future[QueryReply]] = {}
        self._forgets: dict[str, ForgetWait] = {}
        self._evidence: EvidenceStore | None = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MemoryClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        s = self.settings
        # a batch no client can decode on the shared reply partition (a hostile producer)
        # would stop the reply reader for good: it is skipped instead (streams.kafka.fetch)
        fetch.install([t.REPLIES])
        # a search is sent alone and awaited: at once, not after a linger (a burst of
        # exchanges appended together still shares produce requests)
        try:
            self.producer = await start_producer(
                s.kafka.bootstrap,
                s.kafka.idempotence,
                s.kafka.request_timeout_s,
                s.kafka.max_request_bytes,
                linger_ms=0,
            )
        except KafkaConnectionError as exc:
            raise BrokerUnreachable(s.kafka.bootstrap) from exc
        try:
            # a short fetch wait: replies are small and latency is the point
            self.replies = AIOKafkaConsumer(
                bootstrap_servers=s.kafka.bootstrap,
                enable_auto_commit=False,
                fetch_max_wait_ms=s.kafka.query_fetch_wait_ms,
                request_timeout_ms=int(s.kafka.request_timeout_s * 1000),
            )
            async with asyncio.timeout(s.kafka.request_timeout_s):
                await self.replies.start()
                parts = await self.producer.partitions_for(t.REPLIES)
                self.reply_partition = random.choice(sorted(parts))
                tp = TopicPartition(t.REPLIES, self.reply_partition)
                self.replies.assign([tp])
                await self.replies.seek_to_end(tp)
                await self.replies.position(tp)  # resolve now: replies to our requests come after
        except BaseException:
            await self.close()
            raise
        self._reader = asyncio.create_task(self._read_replies())

    async def close(self) -> None:
        if self._reader:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if hasattr(self, "replies"):
            await self.replies.stop()
        if hasattr(self, "producer"):
            await self.producer.stop()

    # -- producing ----------------------------------------------------------------------

    async def add(self, exchanges: Iterable[Exchange]) -> int:
        """Produce exchanges; returns once the broker acknowledged all of them. One over the
        stages' message limit (`MessageTooLarge`) is found before any is sent."""
        payloads = [(ex, self._fitting(ex)) for ex in exchanges]
        futures = [await self._send(ex, payload) for ex, payload in payloads]
        await asyncio.gather(*futures)
        return len(futures)

    async def send(self, message: ExchangeTopicMessage) -> asyncio.Future[RecordMetadata]:
        """Enqueue one message for `memory.exchanges`; the future resolves with its partition
        and offset once the broker acked it. Sends of one session keep their order."""
        return await self._send(message, self._fitting(message))

    def _fitting(self, message: ExchangeTopicMessage) -> bytes:
        return fitting(message, self.settings.kafka.max_message_bytes)

    async def _send(
        self, message: ExchangeTopicMessage, payload: bytes
    ) -> asyncio.Future[RecordMetadata]:
        return await send_traced(self.producer, t.EXCHANGES, payload, message.key.encode())

    async def flush(
        self, namespace: str, session_id: str, after_seq: int | None = None
    ) -> RecordMetadata:
        return await self._control(ControlKind.flush, namespace, session_id, after_seq)

    async def end_session(
        self, namespace: str, session_id: str, after_seq: int | None = None
    ) -> RecordMetadata:
        return await self._control(ControlKind.end_session, namespace, session_id, after_seq)

    async def _control(
        self, kind: ControlKind, namespace: str, session_id: str, after_seq: int | None
    ) -> RecordMetadata:
        msg = SessionControl(
            kind=kind, namespace=namespace, session_id=session_id, after_seq=after_seq
        )
        return await (await self.send(msg))

    async def wait_indexed(
        self, namespace: str, session_id: str, seq: int, timeout_s: float = 60.0
    ) -> None:
        """Return once the session's exchanges up to `seq` are indexed, so that a search
        sees them (read your writes); `TimeoutError` after `timeout_s`.

        The deadline is checked between reads as well: a cancellation that a Redis read
        swallows (redis/redis-py#2028, #2551) would otherwise leave the timeout fired and
        the loop polling for ever (a 0.2 s wait that never returned)."""
        redis = Redis.from_url(self.settings.redis.url, socket_timeout=10)
        progress = Progress(redis)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                async with asyncio.timeout_at(deadline):
                    indexed = await progress.indexed(namespace, [session_id])
                if indexed.get(session_id, -1) >= seq:
                    return
                if loop.time() >= deadline:
                    raise TimeoutError
                await asyncio.sleep(min(0.05, deadline - loop.time()))
        except TimeoutError:
            raise TimeoutError(
                f"{namespace}/{session_id} not indexed up to seq {seq} within {timeout_s:g} s"
            ) from None
        finally:
            await redis.aclose()

    async def usage(self, namespace: str) -> dict[str, int]:
        """Construction token counters of a namespace (input, output, prompt, calls, segments)."""
        return (await construction_usage(self.settings, namespace)).get(namespace, {})

    # -- forgetting -----------------------------------------------------------------------

    async def forget(
        self, namespace: str, session_id: str | None = None, timeout_s: float | None = None
    ) -> Receipt:
        """Forget a namespace, or one session of it, in every stage; returns the receipt
        once the segmenter, encoder and indexer all confirmed. Exchanges already sent (acked
        before this call) are forgotten even if no stage has read them yet; exchanges sent
        after it returns are ingested normally. Raises ForgetFailed or ReplyTimeout."""
        budget = timeout_s or self.settings.kafka.forget_timeout_s
        started = time.perf_counter()
        fid = uuid.uuid4().hex
        wait = self._forgets[fid] = ForgetWait()
        try:
            async with asyncio.timeout(budget):
                async with LagReader(self.settings.kafka.bootstrap) as lag:
                    ends = await lag.end_offsets(t.EXCHANGES, timeout_s=budget)
                req = ForgetRequest(
                    forget_id=fid,
                    namespace=namespace,
                    session_id=session_id,
                    exchanges_end={tp.partition: end for tp, end in ends.items()},
                    reply_partition=self.reply_partition,
                    requested_at=datetime.now(UTC),
                )
                await (await send_traced(self.producer, t.CONTROL, encode(req), namespace.encode()))
                await wait.done.wait()
        except TimeoutError as exc:
            missing = sorted(set(FORGET_STAGES) - set(wait.parts))
            raise ReplyTimeout(
                f"forget {fid} (no receipt from {', '.join(missing)})", budget
            ) from exc
        finally:
            self._forgets.pop(fid, None)
        errors = {s: r.error for s, r in wait.parts.items() if r.error}
        if errors:
            raise ForgetFailed(fid, errors)
        elapsed = round(time.perf_counter() - started, 3)
        return Receipt.of(fid, namespace, session_id, wait.parts, elapsed)

    # -- listing --------------------------------------------------------------------------

    async def list_records(
        self,
        namespace: str,
        session_id: str | None = None,
        memory_type: str | None = None,
        since: date | None = None,
        page: int = 1,
        page_size: int = 50,
    ) -> Page:
        """What is remembered about a namespace (or one session): records, a page at a time.

        Read from LanceDB directly, like `lychee status` counts rows: listing is rare and
        needs no ranking, so the query service (and its request contract) stays as it is."""
        from workers.store.listing import list_records

        store = await self.store()
        return await asyncio.to_thread(
            store.read,
            list_records,
            store.db,
            namespace,
            session_id,
            memory_type,
            since,
            page,
            page_size,
        )

    async def history(self, namespace: str, record_id: str | None = None) -> Any:
        """A namespace's supersessions and open conflicts, or one record's
        (`workers.store.history`), read from LanceDB directly as `list_records` is.

        A namespace with nothing stored has an empty history, as it has no records to list;
        a record id the namespace does not hold raises `RecordMissing`."""
        store = await self.store()
        return await asyncio.to_thread(store.read, _history_of, store, namespace, record_id)

    async def list_turns(
        self, namespace: str, session_id: str | None = None, page: int = 1, page_size: int = 50
    ) -> Page:
        """The raw turns of a namespace (or one session), in conversation order."""
        from workers.store.listing import list_turns

        store = await self.store()
        return await asyncio.to_thread(
            store.read, list_turns, store.db, namespace, session_id, page, page_size
        )

    async def store(self) -> EvidenceStore:
        """The evidence store, opened on first use (LanceDB, read directly: see list_records);
        a local directory that does not exist is an error, not an empty store made there."""
        if self._evidence is None:
            from streams.factories import open_store

            uri = self.settings.store.uri
            if _missing_directory(uri):
                raise StoreMissing(
                    f"no memory store at {uri}: set LYCHEE_LANCEDB_URI to the stack's store "
                    "(a running `lychee up` is read only when no LYCHEE_* connection variable "
                    "is set)"
                )

            self._evidence = await asyncio.to_thread(open_store, self.settings)
        return self._evidence

    # -- request/reply ------------------------------------------------------------------

    async def search(
        self,
        namespace: str,
        query: str,
        k: int = 10,
        session_id: str | None = None,
        timeout_s: float | None = None,
        ablation: str | None = None,
        answer: bool = False,
        token_budget: int | None = None,
    ) -> QueryReply:
        """Ask the query service; raises ReplyTimeout, or QueryFailed on an error reply.
        `token_budget`: the reply's evidence cut to what fits a prompt of that many tokens."""
        budget = timeout_s or self.settings.query.default_timeout_s
        cid = uuid.uuid4().hex
        req = QueryRequest(
            correlation_id=cid,
            namespace=namespace,
            query=query,
            k=k,
            session_id=session_id,
            reply_partition=self.reply_partition,
            deadline_ms=int((time.time() + budget) * 1000),
            ablation=ablation,  # type: ignore[arg-type]
            answer=answer,
            token_budget=token_budget,
        )
        fut: asyncio.Future[QueryReply] = asyncio.get_running_loop().create_future()
        self._pending[cid] = fut
        attrs: dict[str, telemetry.AttributeValue] = {
            "lychee.namespace": namespace,
            "lychee.correlation_id": cid,
            "lychee.k": k,
        }
        try:
            with telemetry.span("memory.search", kind=SpanKind.CLIENT, attributes=attrs):
                async with asyncio.timeout(budget):
                    sent = await send_traced(
                        self.producer, t.QUERIES, encode(req), namespace.encode()
                    )
                    await sent
                    reply = await fut
        except TimeoutError as exc:
            raise ReplyTimeout(cid, budget) from exc
        finally:
            self._pending.pop(cid, None)
        if reply.status != "ok":
            raise QueryFailed(reply)
        return reply

    async def _read_replies(self) -> None:
        while True:
            try:
                batches = await self.replies.getmany(timeout_ms=500)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the broker is away: pending searches time out
                log.warning("client.replies_unreadable", error=repr(exc))
                await asyncio.sleep(1.0)
                continue
            for records in batches.values():
                for rec in records:
                    if rec.value is None and rec.key is None:
                        reason = fetch.take_undecodable(rec.topic, rec.partition, rec.offset)
                        if reason:
                            log.warning("client.undecodable_batch_skipped", reason=reason)
                        continue  # a marker, or a record with neither key nor value
                    with telemetry.consumed(t.REPLIES, rec.headers, rec.partition, rec.offset):
                        self._resolve(rec.key, rec.value)

    def _resolve(self, key: bytes | None, value: bytes | None) -> None:
        """Hand a reply to the search waiting for it; anything else on the shared partition
        (another client's reply, garbage from a hostile producer) is skipped."""
        try:
            cid = key.decode() if key else ""
        except UnicodeDecodeError:
            return
        if cid in self._forgets:
            receipt_part(self._forgets[cid], value)
            return
        fut = self._pending.get(cid)
        if fut is None or fut.done():
            return
        try:
            fut.set_result(decode(value, QueryReply))
        except SerdeError as exc:
            fut.set_exception(UnreadableReply(f"unreadable reply: {exc}"))


def fitting(message: ExchangeTopicMessage, limit: int) -> bytes:
    """The message encoded, when the stages accept its size: an exchange over `limit` would
    be taken by the broker and dead-lettered by the segmenter (`MessageTooLarge`)."""
    payload = encode(message)
    if isinstance(message, Exchange) and len(payload) > limit:
        raise MessageTooLarge(message.exchange_id, len(payload), limit)
    return payload


async def construction_usage(
    settings: Settings, namespace: str | None = None
) -> dict[str, dict[str, int]]:
    """Per-namespace encoder token counters (DESIGN §6.5), as the encoder stage keeps them."""
    redis = Redis.from_url(settings.redis.url, socket_timeout=10)
    try:
        return await read_usage(redis, namespace)
    finally:
        await redis.aclose()


def _history_of(store: EvidenceStore, namespace: str, record_id: str | None) -> Any:
    from workers.store.history import history

    if record_id is not None and not store.records.by_ids(namespace, [record_id]):
        raise RecordMissing(namespace, record_id)
    return history(store.records, store.links, store.segments, namespace, record_id)


def _missing_directory(uri: str) -> bool:
    """Whether `uri` names a directory on this machine that does not exist: a path (`~`
    expanded) or a `file:` URI; an object store's URI has a scheme of its own."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        path = unquote(parts.path)
    elif len(parts.scheme) > 1:  # s3://, gs://, az://, memory:// (one letter: a drive)
        return False
    else:
        path = uri
    return not Path(path).expanduser().exists()
