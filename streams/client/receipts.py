"""A forget's receipts as a client waits for them: one part per stage (segmenter, encoder,
indexer) on the client's reply partition, summed into one receipt once every stage confirmed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from schemas import ForgetReceipt
from schemas.control import FORGET_STAGES
from streams.kafka.errors import SerdeError
from streams.kafka.serde import decode

log = structlog.get_logger("lychee.client")


@dataclass(frozen=True)
class Receipt:
    """What a forget removed, once every stage confirmed it."""

    forget_id: str
    namespace: str
    session_id: str | None
    rows_removed: dict[str, int]
    rows_updated: dict[str, int]
    redis_keys_removed: int
    versions_pruned: int
    elapsed_s: float
    stages: dict[str, ForgetReceipt]

    @classmethod
    def of(
        cls,
        forget_id: str,
        namespace: str,
        session_id: str | None,
        parts: Mapping[str, ForgetReceipt],
        elapsed_s: float,
    ) -> Receipt:
        """The stages' parts summed, table by table."""
        rows: dict[str, int] = {}
        updated: dict[str, int] = {}
        for part in parts.values():
            for name, n in part.rows_removed.items():
                rows[name] = rows.get(name, 0) + n
            for name, n in part.rows_updated.items():
                updated[name] = updated.get(name, 0) + n
        return cls(
            forget_id=forget_id,
            namespace=namespace,
            session_id=session_id,
            rows_removed=rows,
            rows_updated=updated,
            redis_keys_removed=sum(p.redis_keys_removed for p in parts.values()),
            versions_pruned=sum(p.versions_pruned for p in parts.values()),
            elapsed_s=elapsed_s,
            stages=dict(parts),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "forget_id": self.forget_id,
            "namespace": self.namespace,
            "session_id": self.session_id,
            "rows_removed": self.rows_removed,
            "rows_updated": self.rows_updated,
            "redis_keys_removed": self.redis_keys_removed,
            "versions_pruned": self.versions_pruned,
            "elapsed_s": self.elapsed_s,
            "stages": {s: r.elapsed_s for s, r in self.stages.items()},
        }


@dataclass
class ForgetWait:
    """The parts of one forget received so far; `done` once every stage sent its part, or
    one reported an error."""

    parts: dict[str, ForgetReceipt] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)


def receipt_part(wait: ForgetWait, value: bytes | None) -> None:
    """One stage's part, read from the reply partition (an unreadable one is logged)."""
    try:
        part = decode(value, ForgetReceipt)
    except SerdeError as exc:
        log.warning("client.unreadable_receipt", error=str(exc)[:200])
        return
    wait.parts[part.stage] = part
    if set(FORGET_STAGES) <= set(wait.parts) or part.error:
        wait.done.set()
