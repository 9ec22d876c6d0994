"""What the `lychee up` tests share: waiting for its workers, and reading the turns stored."""

from __future__ import annotations

from streams.settings import Settings
from streams.stack.ready import wait_workers
from streams.stack.up_process import UpProcess

READY_S = 600.0


async def ready(up: UpProcess) -> Settings:
    settings = up.settings()
    await wait_workers(settings, READY_S, up.check)
    return settings


def turn_ids(settings: Settings, ns: str) -> list[str]:
    from streams.factories import open_store
    from workers.store import namespace_filter

    tbl = open_store(settings).db.table("turns")
    rows = tbl.search().where(namespace_filter(ns)).select(["turn_id"]).limit(None).to_list()
    return [r["turn_id"] for r in rows]
