"""Consumer lag per stage, from the broker's committed offsets and end offsets."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas import topics as t

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
        self._groups: dict[str, AIOKafkaConsumer] = {}
        try:
            await self.consumer.start()
        except BaseException:
            await stop_consumer(self.consumer)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        for c in [self.consumer, *self._groups.values()]:
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

    async def end_offsets(self, topic: str) -> dict[TopicPartition, int]:
        """High-water marks, verified by reading from the reported end.

        Tansu answers ListOffsets with the base offset of the last record batch rather
        than the high-water mark, so the reported figure can be a few records short;
        reading on from it finds the true end (and costs one empty fetch on Kafka).
        """
        parts = self.consumer.partitions_for_topic(topic)
        if parts is None:
            await self.consumer._client.force_metadata_update()  # noqa: SLF001 - no public refresh
            parts = self.consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return {}
        ends = dict(await self.consumer.end_offsets(tps))
        probe = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await probe.start()
        try:
            probe.assign(tps)
            for tp in tps:
                probe.seek(tp, ends[tp])
            while batches := await probe.getmany(timeout_ms=200, max_records=10_000):
                for tp, records in batches.items():
                    ends[tp] = max(ends[tp], records[-1].offset + 1)
        finally:
            await stop_consumer(probe)
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
