"""The Kafka publisher every stage uses: waits for acks, idempotent where the broker allows.

Idempotence is a preference, not a requirement: a broker that cannot hand out a producer
id (Tansu 0.6 answers aiokafka's InitProducerId v0 with UnknownError) gets a plain
producer instead, with one warning per process. Delivery stays at-least-once either way;
every sink is idempotent (DESIGN §9).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import BrokerResponseError
from aiokafka.structs import RecordMetadata
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from streams import metrics
from streams.kafka.errors import PublisherStopped
from streams.settings import Settings
from workers import telemetry
from workers.ports import OutMessage

log = structlog.get_logger("lychee.producer")

DEFAULT_MAX_REQUEST_BYTES = 8_388_608
# A lone message waits this long for others to share its produce request: what a stage's
# output and a burst of exchanges batch on. A request and its reply are alone and awaited:
# they are sent at once (`linger_ms=0`), which takes about 5 ms off each way
# (docs/decisions.md#requests-and-replies-do-not-linger).
LINGER_MS = 5

# Bootstraps known to give no producer id: probed once per process, warned about once.
_NO_PRODUCER_ID: set[str] = set()


class _ProbeNoise(logging.Filter):
    """Hides aiokafka's own ERROR line about InitProducerId while we probe for it: the
    fallback's one warning says the same, once."""

    probing = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.probing and "InitProducerId" in record.getMessage())


_PROBE_NOISE = _ProbeNoise()
logging.getLogger("aiokafka.producer.sender").addFilter(_PROBE_NOISE)


def new_producer(
    bootstrap: str,
    idempotence: bool,
    timeout_s: float = 30.0,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    linger_ms: int = LINGER_MS,
) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=idempotence,
        linger_ms=linger_ms,
        max_batch_size=min(1_048_576, max_request_bytes),
        max_request_size=max_request_bytes,
        request_timeout_ms=int(timeout_s * 1000),
    )


async def start_producer(
    bootstrap: str,
    idempotence: bool,
    timeout_s: float = 30.0,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    linger_ms: int = LINGER_MS,
) -> AIOKafkaProducer:
    """A started producer: idempotent when asked for and the broker gives a producer id.

    ApiVersions cannot tell (Tansu advertises InitProducerId v0-5 but fails v0), so the
    only probe is to try: aiokafka asks for the id inside `start()`, which fails within
    milliseconds. A broker response error there means "no producer id": the plain
    producer takes over. Anything else (an unreachable broker) is raised as it is.
    """
    if idempotence and bootstrap not in _NO_PRODUCER_ID:
        producer = new_producer(bootstrap, True, timeout_s, max_request_bytes, linger_ms)
        _PROBE_NOISE.probing += 1
        try:
            await asyncio.wait_for(producer.start(), timeout_s)
            return producer
        except BrokerResponseError as exc:
            await producer.stop()
            _NO_PRODUCER_ID.add(bootstrap)
            log.warning(
                "producer.idempotence_off",
                bootstrap=bootstrap,
                reason=f"the broker gives no producer id ({type(exc).__name__})",
                effect="plain producer; delivery stays at-least-once with idempotent sinks",
            )
        except BaseException:
            await producer.stop()
            raise
        finally:
            _PROBE_NOISE.probing -= 1
    producer = new_producer(bootstrap, False, timeout_s, max_request_bytes, linger_ms)
    try:
        await asyncio.wait_for(producer.start(), timeout_s)
    except BaseException:
        await producer.stop()
        raise
    return producer


class KafkaPublisher:
    """`publish` returns once the broker acknowledged every message (acks=all).

    It starts on first use and lives as long as the app: an agent that crashes and is
    restarted by Faust finds it still running. Only the app's shutdown stops it.
    """

    def __init__(
        self,
        bootstrap: str,
        idempotence: bool,
        timeout_s: float = 30.0,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        linger_ms: int = LINGER_MS,
    ) -> None:
        self.bootstrap = bootstrap
        self.linger_ms = linger_ms
        self.idempotence = idempotence
        self.timeout_s = timeout_s
        self.max_request_bytes = max_request_bytes
        self._producer: AIOKafkaProducer | None = None
        self._stopped = False
        self._lock: asyncio.Lock | None = None

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("KafkaPublisher.start() was not awaited")
        return self._producer

    @classmethod
    def from_settings(cls, settings: Settings, linger_ms: int = LINGER_MS) -> KafkaPublisher:
        return cls(
            settings.kafka.bootstrap,
            settings.kafka.idempotence,
            settings.kafka.request_timeout_s,
            settings.kafka.max_request_bytes,
            linger_ms,
        )

    async def start(self) -> None:
        """Create and connect the producer (aiokafka needs the running loop for that)."""
        await self._ready()

    async def _ready(self) -> AIOKafkaProducer:
        if self._stopped:
            raise PublisherStopped("the publisher is stopped (shutting down)")
        if self._producer is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self._producer is None:
                    self._producer = await start_producer(
                        self.bootstrap,
                        self.idempotence,
                        self.timeout_s,
                        self.max_request_bytes,
                        self.linger_ms,
                    )
        return self._producer

    async def stop(self) -> None:
        self._stopped = True
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()

    async def partitions(self, topic: str) -> set[int]:
        """The topic's partition ids, from the producer's metadata."""
        producer = await self._ready()
        return set(await asyncio.wait_for(producer.partitions_for(topic), self.timeout_s))

    async def publish(self, messages: Sequence[OutMessage]) -> None:
        producer = await self._ready()
        if telemetry.active():
            await self._publish_traced(producer, messages)
            return
        futures = [
            await producer.send(
                m.topic, value=m.value, key=m.key.encode(), headers=list(m.headers) or None
            )
            for m in messages
        ]
        await asyncio.wait_for(asyncio.gather(*futures), timeout=self.timeout_s)
        for m in messages:
            metrics.MESSAGES_OUT.labels(m.topic).inc()

    async def _publish_traced(
        self, producer: AIOKafkaProducer, messages: Sequence[OutMessage]
    ) -> None:
        """`publish` with one `publish <topic>` span per message, a child of the context the
        message was made in (its own trace headers, else the current one), whose context the
        message then carries on."""
        spans, futures = [], []
        for m in messages:
            ctx = telemetry.parent(m.headers)
            attrs = telemetry.messaging("publish", m.topic, key=m.key)
            span = telemetry.tracer().start_span(
                f"publish {m.topic}", context=ctx, kind=SpanKind.PRODUCER, attributes=attrs
            )
            with trace.use_span(span, end_on_exit=False):
                headers = telemetry.inject(m.headers)
            spans.append(span)
            futures.append(
                await producer.send(
                    m.topic, value=m.value, key=m.key.encode(), headers=list(headers)
                )
            )
        try:
            acks = await asyncio.wait_for(asyncio.gather(*futures), timeout=self.timeout_s)
            for span, meta in zip(spans, acks, strict=True):
                span.set_attributes(
                    telemetry.messaging("publish", meta.topic, meta.partition, meta.offset)
                )
        except BaseException as exc:
            for span in spans:
                span.record_exception(exc)
                span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            for span in spans:
                span.end()
        for m in messages:
            metrics.MESSAGES_OUT.labels(m.topic).inc()

    async def send_raw(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Any:
        """One record as given; returns its RecordMetadata (partition, offset) once acked.
        When tracing, it carries the current context and a `publish <topic>` span."""
        producer = await self._ready()
        attrs = (
            telemetry.messaging("publish", topic, partition, key=key)
            if telemetry.active()
            else None
        )
        with telemetry.span(f"publish {topic}", kind=SpanKind.PRODUCER, attributes=attrs) as span:
            if span.is_recording():
                headers = list(telemetry.inject(headers or ()))
            fut = await producer.send(
                topic, value=value, key=key, partition=partition, headers=headers
            )
            meta = await asyncio.wait_for(fut, timeout=self.timeout_s)
            telemetry.set_attributes(
                span, telemetry.messaging("publish", topic, meta.partition, meta.offset)
            )
        metrics.MESSAGES_OUT.labels(topic).inc()
        return meta


async def send_traced(
    producer: AIOKafkaProducer,
    topic: str,
    value: bytes,
    key: bytes,
    headers: Sequence[tuple[str, bytes]] = (),
) -> asyncio.Future[RecordMetadata]:
    """`producer.send`, carrying the current trace context under a `publish <topic>` span
    that ends when the broker acks (with the partition and offset); a plain send when
    tracing is off."""
    if not telemetry.active():
        sent: asyncio.Future[RecordMetadata] = await producer.send(
            topic, value=value, key=key, headers=list(headers) or None
        )
        return sent
    span = telemetry.tracer().start_span(
        f"publish {topic}",
        kind=SpanKind.PRODUCER,
        attributes=telemetry.messaging("publish", topic, key=key),
    )
    with trace.use_span(span, end_on_exit=False):
        carried = telemetry.inject(headers)
    try:
        acked: asyncio.Future[RecordMetadata] = await producer.send(
            topic, value=value, key=key, headers=list(carried)
        )
    except BaseException:
        span.end()
        raise

    def ended(fut: asyncio.Future[RecordMetadata]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            span.set_status(StatusCode.ERROR, "not acknowledged")
        else:
            meta = fut.result()
            span.set_attributes(telemetry.messaging("publish", topic, meta.partition, meta.offset))
        span.end()

    acked.add_done_callback(ended)
    return acked
