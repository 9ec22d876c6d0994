"""The Faust monitor of every stage app: messages in and consumer lag as Prometheus metrics.

Faust reports each fetched record's partition end offset and each commit to its monitor, so
the lag of every assigned partition is known in-process without asking the broker.
"""

from __future__ import annotations

from typing import Any

import structlog
from faust.sensors.monitor import Monitor

from streams import metrics

log = structlog.get_logger("lychee.monitor")


class StageMonitor(Monitor):
    def __init__(self, stage: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stage = stage

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        super().on_message_in(tp, offset, message)
        metrics.MESSAGES_IN.labels(self.stage, tp.topic).inc()

    def track_tp_end_offset(self, tp: Any, offset: int) -> None:
        super().track_tp_end_offset(tp, offset)
        self._lag(tp)

    def on_tp_commit(self, tp_offsets: Any) -> None:
        super().on_tp_commit(tp_offsets)
        for tp in tp_offsets:
            self._lag(tp)

    def on_rebalance_start(self, app: Any) -> dict[str, Any]:
        state: dict[str, Any] = super().on_rebalance_start(app)
        metrics.CONSUMER_LAG.clear()  # partitions may move: stale gauges would lie
        return state

    def on_rebalance_end(self, app: Any, state: dict[str, Any]) -> None:
        super().on_rebalance_end(app, state)
        # which member owns what: with several processes per stage, the place to look
        assigned = sorted(f"{tp.topic}:{tp.partition}" for tp in app.consumer.assignment())
        log.info("stage.assigned", stage=self.stage, partitions=assigned)

    def _lag(self, tp: Any) -> None:
        end, committed = self.tp_end_offsets.get(tp), self.tp_committed_offsets.get(tp)
        if end is None or committed is None:  # known after the first fetch and commit
            return
        metrics.CONSUMER_LAG.labels(self.stage, tp.topic, str(tp.partition)).set(
            max(0, end - committed)
        )
