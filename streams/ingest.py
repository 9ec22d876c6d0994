"""Produce conversation files through Kafka, with a progress bar, optionally waiting."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from streams.client import MemoryClient
from streams.lag import LagReader
from streams.settings import Settings
from workers.datasets import Conversation, load


@dataclass
class IngestStats:
    namespaces: int
    sessions: int
    exchanges: int
    turns: int
    seconds: float


async def produce(client: MemoryClient, conversations: list[Conversation], progress: bool = True,
                  chunk: int = 200) -> IngestStats:  # fmt: skip
    """Each session's exchanges in order, then `end_session` so its last segment closes."""
    started = time.perf_counter()
    total = sum(len(s.exchanges) for c in conversations for s in c.sessions)
    bar = tqdm(total=total, unit="ex", desc="ingest", disable=not progress, leave=False)
    sessions = turns = 0
    for conv in conversations:
        for session in conv.sessions:
            for i in range(0, len(session.exchanges), chunk):
                part = session.exchanges[i : i + chunk]
                await client.add(part)
                bar.update(len(part))
            if session.exchanges:
                last = session.exchanges[-1].seq
                await client.end_session(conv.namespace, session.session_id, after_seq=last)
            sessions += 1
            turns += sum(len(e.turns) for e in session.exchanges)
    bar.close()
    return IngestStats(len(conversations), sessions, total, turns, time.perf_counter() - started)


async def ingest_file(settings: Settings, path: Path, fmt: str, namespace: str | None,
                      wait: bool, timeout_s: float) -> IngestStats:  # fmt: skip
    started = time.perf_counter()
    conversations = load(path, fmt, namespace)
    async with MemoryClient(settings) as client:
        stats = await produce(client, conversations)
    if wait:
        async with LagReader(settings.kafka_bootstrap) as lag:
            await lag.wait_drained(timeout_s=timeout_s)
        stats.seconds = time.perf_counter() - started
    return stats
