"""Consumer lag per stage, from the broker's committed offsets and end offsets."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas import topics as t

log = structlog.get_logger("lychee.lag")

# stage -> (consumer group, input topic); the order is the order data flows in
STAGE_INPUTS: dict[str, tuple[str, str]] = {
    "segmenter": ("lychee-segmenter", t.EXCHANGES),
    "encoder": ("lychee-encoder", t.SEGMENTS),
    "indexer": ("lychee-indexer", t.TURNS),
    "indexer-records": ("lychee-indexer", t.RECORDS),
    "query": ("lychee-query", t.QUERIES),
}
# what must be drained for "everything is indexed", in the order data flows
PIPELINE = ("segmenter", "indexer", "encoder", "indexer-records")


@dataclass(frozen=True)
class Lag:
    stage: str
    group: str
    topic: str
    end: int
    committed: int

    @property
    def lag(self) -> int:
        return self.end - self.committed


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """`consumer.stop()`, minus an aiokafka race: a consumer stopped right after it started
    awaits its own just-cancelled internal task and raises CancelledError (aiokafka 0.14,
    `NoGroupCoordinator.close`). Only a cancellation of the caller propagates."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


class LagReader:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    async def __aenter__(self) -> LagReader:
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        # reads nothing it keeps: one fetch per partition for the high watermark in the answer.
        # A short wait (Tansu answers a wait of 0 with nothing, not even the watermark) and
        # the smallest fetch size (the broker still returns at least one batch).
        self.probe = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=1,
            fetch_max_bytes=1,
            max_partition_fetch_bytes=1,
            check_crcs=False,  # the records are never read: a corrupt batch must not matter
        )
        self._groups: dict[str, AIOKafkaConsumer] = {}
        self._seen: dict[TopicPartition, int] = {}
        try:
            await self.consumer.start()
            await self.probe.start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        for c in [self.consumer, self.probe, *self._groups.values()]:
            await stop_consumer(c)

    async def _group(self, group: str) -> AIOKafkaConsumer:
        # OffsetFetch through a group's (unsubscribed) consumer: it never joins the group,
        # and unlike the admin client's request version it is understood by Tansu too.
        if group not in self._groups:
            c = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False
            )
            await c.start()
            self._groups[group] = c
        return self._groups[group]

    async def end_offsets(self, topic: str, timeout_s: float = 30.0) -> dict[TopicPartition, int]:
        """High-water marks, from the Fetch response of each partition.

        Tansu answers ListOffsets(latest) wrongly: with the base offset of the last batch on
        its memory engine, and with a much lower, arbitrary figure on S3 (4 for a partition
        of 111 records). The high watermark in a Fetch response is right on both engines and
        on Kafka. Each fetch starts where the partition's end was last seen (ends only grow;
        an offset past a restarted memory broker's end is reset to the beginning).
        """
        parts = self.consumer.partitions_for_topic(topic)
        if parts is None:
            await self.consumer._client.force_metadata_update()  # noqa: SLF001 - no public refresh
            parts = self.consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return {}
        self.probe.assign(tps)  # a fresh assignment: no high watermark known yet
        for tp in tps:
            self.probe.seek(tp, self._seen.get(tp, 0))
        ends: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + timeout_s
        while len(ends) < len(tps):
            if time.monotonic() > deadline:
                missing = ", ".join(str(tp.partition) for tp in tps if tp not in ends)
                raise TimeoutError(f"{topic}: no high watermark for partitions {missing}")
            try:
                await self.probe.getmany(*[tp for tp in tps if tp not in ends], timeout_ms=10)
            except Exception as exc:  # noqa: BLE001 - whatever one batch's bytes raise
                # a batch it cannot unpack (bad CRC, a header key not UTF-8): the watermark
                # came with the fetch response, before the records were unpacked; a lasting
                # failure ends as the TimeoutError above
                log.debug("lag.probe_unreadable_batch", topic=topic, error=repr(exc))
            for tp in tps:
                hw = self.probe.highwater(tp)
                if hw is not None:
                    ends[tp] = hw
        self._seen.update(ends)
        return ends

    async def stage(self, stage: str) -> Lag:
        group, topic = STAGE_INPUTS[stage]
        reader = await self._group(group)
        ends = await self.end_offsets(topic)
        committed = 0
        for tp in ends:
            committed += await reader.committed(tp) or 0
        return Lag(stage, group, topic, sum(ends.values()), committed)

    async def wait_drained(
        self, stages: tuple[str, ...] = PIPELINE, timeout_s: float = 600.0
    ) -> list[Lag]:
        """Wait until every stage, read in flow order, has committed all its input.

        Reading upstream first matters: a stage publishes before it commits, so once an
        upstream lag reads zero the downstream end offsets already include its output.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            lags = [await self.stage(s) for s in stages]
            if all(x.lag == 0 for x in lags):
                return lags
            if time.monotonic() > deadline:
                raise TimeoutError(
                    "still lagging: " + ", ".join(f"{x.stage}={x.lag}" for x in lags)
                )
            await asyncio.sleep(0.25)
