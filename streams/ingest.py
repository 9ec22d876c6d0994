"""Produce conversation files through Kafka, with a progress bar, optionally waiting."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from redis.asyncio import Redis
from tqdm import tqdm

from schemas import Exchange, session_key
from schemas.base import MAX_SEQ
from streams import dlq
from streams.client import MemoryClient
from streams.client.memory import fitting
from streams.errors import IngestError, MessageTooLarge, SeqRejected
from streams.gateway.accepted import content_digest
from streams.kafka.lag import LagReader
from streams.seqs import Ack, SeqAllocator, Wanted
from streams.settings import Settings
from workers.datasets import Conversation, Session, Skipped, load
from workers.segmenter.state_store import SessionStore


@dataclass
class IngestStats:
    namespaces: int
    sessions: int
    exchanges: int
    turns: int
    seconds: float
    duplicates: int = 0  # exchange ids accepted before: not produced again
    replays: int | None = None  # fenced by the segmenter as already applied (with --wait)
    skipped: list[Skipped] = field(default_factory=list)  # refused by the contract: not sent
    undated: int = 0  # exchanges with no date of their own or their turns'
    # refused by a stage after the broker took them (with --wait): not indexed
    dead_letters: list[dlq.DeadLetter] = field(default_factory=list)


def _bar(total: int, progress: bool) -> tqdm[None]:
    """The exchanges produced so far, on stderr, drawn only on a terminal and wiped when
    closed. A pipe or a log file cannot redraw a line: there the bar would stay as its first
    frame (`0/N`), with no newline, in front of whatever is written next."""
    return tqdm(
        total=total, unit="ex", desc="ingest", disable=None if progress else True, leave=False
    )


async def produce(
    client: MemoryClient, conversations: list[Conversation], progress: bool = True, chunk: int = 200
) -> IngestStats:
    """Each session's exchanges in order, then `end_session` so its last segment closes."""
    started = time.perf_counter()
    total = sum(len(s.exchanges) for c in conversations for s in c.sessions)
    sessions = turns = 0
    with _bar(total, progress) as bar:
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
    return IngestStats(len(conversations), sessions, total, turns, time.perf_counter() - started)


async def produce_numbered(
    client: MemoryClient,
    allocator: SeqAllocator,
    conversations: list[Conversation],
    progress: bool = True,
    chunk: int = 200,
    timeout_s: float = 30.0,
) -> IngestStats:
    """Like `produce`, with each session's seqs from the gateway's allocator (streams.seqs).

    A line without `seq` continues after the session's last allocated, accepted or applied
    seq, so a second file continues a session instead of being fenced as replays; a line's
    own seq must be above those (else IngestError, nothing of that chunk produced); an
    exchange id accepted before keeps its seq and is not produced again.
    """
    started = time.perf_counter()
    total = sum(len(s.exchanges) for c in conversations for s in c.sessions)
    sessions = turns = duplicates = 0
    with _bar(total, progress) as bar:
        for conv in conversations:
            for session in conv.sessions:
                last = -1
                for i in range(0, len(session.exchanges), chunk):
                    part = session.exchanges[i : i + chunk]
                    top, sent = await _add_numbered(client, allocator, session, part, timeout_s)
                    last, duplicates = max(last, top), duplicates + len(part) - len(sent)
                    turns += sum(len(e.turns) for e in sent)
                    bar.update(len(part))
                if session.exchanges:
                    await client.end_session(conv.namespace, session.session_id, after_seq=last)
                sessions += 1
    stats = IngestStats(len(conversations), sessions, total, turns, time.perf_counter() - started)
    stats.duplicates = duplicates
    return stats


async def _add_numbered(
    client: MemoryClient,
    allocator: SeqAllocator,
    session: Session,
    part: list[Exchange],
    timeout_s: float,
) -> tuple[int, list[Exchange]]:
    """Allocate, produce and confirm one chunk of a session; (its highest seq, the exchanges
    produced: those not accepted before)."""
    ns, sid = part[0].namespace, session.session_id
    deadline = asyncio.get_running_loop().time() + timeout_s
    wanted = [
        Wanted(
            e.exchange_id,
            None if e.exchange_id in session.unnumbered else e.seq,
            content_digest(e),  # type: ignore[arg-type]  # the same turns as an ExchangeIn
            e.named_turns(),
        )
        for e in part
    ]
    async with allocator.session(ns, sid, deadline) as handle:
        async with handle.ordered():
            try:
                got = await handle.allocate(wanted)
            except SeqRejected as exc:
                ex = part[exc.index]
                raise IngestError(
                    f"namespace {ns!r}, session {sid!r}, exchange {ex.exchange_id!r}: "
                    f"{exc.describe()}"
                ) from exc
            new = [
                (e, w, a.seq) for e, w, a in zip(part, wanted, got, strict=True) if not a.duplicate
            ]
            sends = [
                (w, seq, await client.send(e.model_copy(update={"seq": seq}))) for e, w, seq in new
            ]
        async with asyncio.timeout(timeout_s):
            acked = await asyncio.gather(*(f for _, _, f in sends))
        await handle.confirm(
            [
                Ack(w.exchange_id, seq, m.partition, m.offset, w.digest)
                for (w, seq, _), m in zip(sends, acked, strict=True)
            ]
        )
    return max(a.seq for a in got), [e for e, _, _ in new]


def oversized(conversations: list[Conversation], limit: int, file: str) -> list[Skipped]:
    """The exchanges whose message would exceed the stages' `limit` (measured with the
    largest seq, as the gateway measures them), taken out of their sessions: the stages
    would dead-letter each after the broker took it, and a caller waiting for the file
    would hear nothing of it."""
    over: list[Skipped] = []
    for conv in conversations:
        for session in conv.sessions:
            kept = []
            for ex in session.exchanges:
                try:
                    fitting(ex.model_copy(update={"seq": MAX_SEQ}), limit)
                except MessageTooLarge as exc:
                    turn = ex.turns[0].turn_id
                    over.append(Skipped(file, str(exc), conv.namespace, session.session_id, turn))
                else:
                    kept.append(ex)
            session.exchanges = kept
    return over


async def dead_lettered(
    settings: Settings, conversations: list[Conversation], since: datetime
) -> list[dlq.DeadLetter]:
    """The dead letters written since `since` for the sessions of `conversations` (or for
    one of their namespaces, by a message that names no session): what a stage refused of
    them after the broker took them, which the producer's acks cannot tell."""
    sessions = {(c.namespace, s.session_id) for c in conversations for s in c.sessions}
    namespaces = {ns for ns, _ in sessions}
    return [
        letter
        for letter in await dlq.read(settings, since=since)
        if (owner := letter.owner()) in sessions
        or (owner is not None and owner[1] is None and owner[0] in namespaces)
    ]


async def ingest_file(
    settings: Settings, path: Path, fmt: str, namespace: str | None, wait: bool, timeout_s: float
) -> IngestStats:
    """Produce FILE; JSON lines are numbered per session through Redis (`produce_numbered`).

    With `wait`, returns once everything is indexed, with the exchanges the segmenter fenced
    as replays meanwhile (already applied: nothing of them was indexed again) and the dead
    letters a stage wrote meanwhile for the file's sessions. A message the contract refuses
    is left out alone and listed in `skipped`; when nothing else is left, nothing is sent.
    """
    started = time.perf_counter()
    since = datetime.now(UTC)
    skipped: list[Skipped] = []
    conversations = load(path, fmt, namespace, skipped)
    skipped += oversized(conversations, settings.kafka.max_message_bytes, str(path))
    if skipped and not any(c.turn_count for c in conversations):
        return IngestStats(0, 0, 0, 0, time.perf_counter() - started, skipped=skipped)
    keys = [session_key(c.namespace, s.session_id) for c in conversations for s in c.sessions]
    redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
    try:
        sessions = SessionStore(redis)
        replays_before = await sessions.replays(keys) if wait else {}
        async with MemoryClient(settings) as client:
            if fmt == "jsonl":
                allocator = SeqAllocator(
                    redis,
                    ttl_s=settings.gateway.seq_ttl_s,
                    lease_s=settings.gateway.produce_timeout_s + 5,
                )
                stats = await produce_numbered(client, allocator, conversations)
            else:
                stats = await produce(client, conversations)
        if wait:
            async with LagReader(settings.kafka.bootstrap) as lag:
                await lag.wait_drained(timeout_s=timeout_s)
            after = await sessions.replays(keys)
            stats.replays = sum(after[k] - replays_before.get(k, 0) for k in keys)
            stats.dead_letters = await dead_lettered(settings, conversations, since)
            stats.seconds = time.perf_counter() - started
    finally:
        await redis.aclose()
    stats.skipped = skipped
    stats.undated = sum(
        1
        for c in conversations
        for e in c.exchanges
        if e.session_date is None and not any(t.created_at for t in e.turns)
    )
    return stats
