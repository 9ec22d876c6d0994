"""The Kafka publisher every stage uses: waits for acks, idempotence as configured."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from streams import metrics
from streams.settings import Settings
from workers.ports import OutMessage


class KafkaPublisher:
    """`publish` returns once the broker acknowledged every message (acks=all)."""

    def __init__(self, bootstrap: str, idempotence: bool, timeout_s: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.idempotence = idempotence
        self.timeout_s = timeout_s
        self._producer: AIOKafkaProducer | None = None

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("KafkaPublisher.start() was not awaited")
        return self._producer

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaPublisher:
        return cls(settings.kafka_bootstrap, settings.kafka_idempotence, settings.request_timeout_s)

    async def start(self) -> None:
        """Create and connect the producer (aiokafka needs the running loop for that)."""
        if self._producer is None:
            self._producer = new_producer(self.bootstrap, self.idempotence, self.timeout_s)
            await self._producer.start()

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def publish(self, messages: Sequence[OutMessage]) -> None:
        futures = [
            await self.producer.send(m.topic, value=m.value, key=m.key.encode()) for m in messages
        ]
        await asyncio.wait_for(asyncio.gather(*futures), timeout=self.timeout_s)
        for m in messages:
            metrics.MESSAGES_OUT.labels(m.topic).inc()

    async def send_raw(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        fut = await self.producer.send(
            topic, value=value, key=key, partition=partition, headers=headers
        )
        await asyncio.wait_for(fut, timeout=self.timeout_s)
        metrics.MESSAGES_OUT.labels(topic).inc()


def new_producer(bootstrap: str, idempotence: bool, timeout_s: float = 30.0) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=idempotence,
        linger_ms=5,
        max_batch_size=1_048_576,
        max_request_size=8_388_608,
        request_timeout_ms=int(timeout_s * 1000),
    )
