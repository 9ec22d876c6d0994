"""Dead letters brought back: list them by reason, show one, replay them to their source topic.

A dead letter (`streams.kafka.guard.DeadLetters`) holds the original key and bytes, the
original headers (prefixed `original.`) and the reason in headers. `replay` produces each
original key, value and headers back to the source topic named there, adding a
`lychee-replay` header, and records what it replayed in Redis (`REPLAYED_KEY`), so that a
second replay of the same dead letters is refused unless forced. Downstream, deterministic
ids make a replayed message idempotent: a segment encodes to the same records, a record
batch writes the same rows.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from schemas import topics as t
from schemas.base import is_name
from streams import metrics
from streams.errors import DeadLetterError
from streams.kafka.guard import ORIGINAL, REPLAY_HEADER
from streams.kafka.producer import KafkaPublisher
from streams.kafka.reader import Stored, read_stored
from streams.kafka.topics import DLQ_SOURCES
from streams.settings import Settings
from workers.forget import Fences, Source, source_of

REPLAYED_KEY = "lychee:dlq:replayed"  # hash: "<dlq topic>/<partition>/<offset>" -> JSON receipt
_OURS = frozenset(
    {
        "error",
        "error_type",
        "stage",
        "source_topic",
        "source_partition",
        "source_offset",
        "failed_at_ms",
        "value_null",
        "value_dropped",
        "value_size",
        "value_sha256",
        "key_size",
    }
)


def dlq_topic(name: str) -> str:
    """`memory.segments` or `memory.segments.dlq` -> `memory.segments.dlq`."""
    source = name.removesuffix(".dlq")
    if source not in DLQ_SOURCES:
        known = ", ".join(DLQ_SOURCES)
        raise DeadLetterError(f"no dead-letter topic for {name!r}: the sources are {known}")
    return t.dlq(source)


def _keyed_owner(key: bytes | None) -> tuple[str, str | None] | None:
    """The namespace (and session) a message key names: `namespace/session` or a namespace,
    each a name by the contract's rule; None otherwise."""
    namespace, slash, session = (key or b"").decode(errors="replace").partition("/")
    if not is_name(namespace) or (slash and not is_name(session)):
        return None
    return namespace, session or None


# A value no JSON reader takes (a byte-order mark before it, bytes that are no UTF-8, a cut)
# may still name its namespace in its words, which a forget of that namespace must hide.
_NAMED = re.compile(rb'"namespace"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._:@+-]{0,127})"')
_SESSION = re.compile(rb'"session_id"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._:@+-]{0,127})"')


def _worded_owner(value: bytes) -> tuple[str, str | None] | None:
    """The namespace (and session) the bytes of a value that is no JSON name first."""
    named = _NAMED.search(value)
    if named is None:
        return None
    session = _SESSION.search(value)
    return named.group(1).decode(), session.group(1).decode() if session else None


@dataclass(frozen=True)
class DeadLetter:
    topic: str  # the dead-letter topic
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]  # ours: error, error_type, stage, source_*...
    original_headers: tuple[tuple[str, bytes], ...]

    @classmethod
    def of(cls, topic: str, r: Stored) -> DeadLetter:
        ours = {k: v.decode(errors="replace") for k, v in r.headers if k in _OURS}
        original = tuple((k[len(ORIGINAL) :], v) for k, v in r.headers if k.startswith(ORIGINAL))
        value = None if ours.get("value_null") else r.value
        return cls(topic, r.partition, r.offset, r.key, value, ours, original)

    @property
    def id(self) -> str:
        return f"{self.partition}:{self.offset}"

    @property
    def error_type(self) -> str:
        return self.headers.get("error_type", "?")

    @property
    def source_topic(self) -> str:
        """The topic its dead-letter topic serves: the only one it goes back to."""
        return self.topic.removesuffix(".dlq")

    @property
    def misdirected(self) -> bool:
        """Its headers name another source than its dead-letter topic serves. Whoever can
        produce to a `.dlq` topic writes these headers, so they never choose where a replay
        writes (the control topic, say): such a letter is not replayed."""
        named = self.headers.get("source_topic")
        return named is not None and named != self.source_topic

    def owner(self) -> tuple[str, str | None] | None:
        """The namespace and session its value belongs to, else those its key names (a
        value that is no JSON object still came keyed `namespace/session`, or by namespace,
        and a forget of that namespace hides it too), else those the words of a value no
        JSON reader takes name; None when none names one."""
        try:
            data = orjson.loads(self.value or b"")
        except orjson.JSONDecodeError:
            return _keyed_owner(self.key) or _worded_owner(self.value or b"")
        namespace = data.get("namespace") if isinstance(data, dict) else None
        if isinstance(namespace, str):
            session = data.get("session_id") if isinstance(data, dict) else None
            return namespace, session if isinstance(session, str) else None
        return _keyed_owner(self.key)

    def lineage(self) -> Source | None:
        """Where in `memory.exchanges` the message came from, which a forget fences by: an
        exchange's own position, or the lineage header of what was derived from one."""
        if self.source_topic == t.EXCHANGES:
            p, o = self.headers.get("source_partition", ""), self.headers.get("source_offset", "")
            return Source(int(p), int(o)) if _whole(p) and _whole(o) else None
        return source_of(self.original_headers)

    @property
    def failed_at(self) -> datetime | None:
        ms = self.headers.get("failed_at_ms", "")
        try:  # a header another producer wrote may name no moment a datetime holds
            return datetime.fromtimestamp(int(ms) / 1000, UTC) if _whole(ms) else None
        except (OverflowError, OSError):
            return None

    def source_position(self) -> tuple[str, str, str] | None:
        """Where its message was read (topic, partition, offset): one message read by several
        stages has a letter from each, and is replayed once."""
        p, o = self.headers.get("source_partition", ""), self.headers.get("source_offset", "")
        return (self.source_topic, p, o) if _whole(p) and _whole(o) else None

    @property
    def value_dropped(self) -> bool:
        return bool(self.headers.get("value_dropped"))

    @property
    def after_replay(self) -> bool:
        """A replayed message that failed again (it carries the replay's header)."""
        return any(k == REPLAY_HEADER for k, _ in self.original_headers)

    def ledger_field(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    def as_dict(self, full: bool = False, limit: int | None = 300) -> dict[str, Any]:
        """The letter as the CLI and the gateway show it: the value's text cut to `limit`
        characters (None: whole); `full`: with its headers, and a value that fits decoded."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "id": self.id,
            "error_type": self.error_type,
            "error": self.headers.get("error", ""),
            "stage": self.headers.get("stage"),
            "source": f"{self.source_topic} {self.headers.get('source_partition', '?')}:"
            f"{self.headers.get('source_offset', '?')}",
            "failed_at": self.failed_at.isoformat() if self.failed_at else None,
            "key": _text(self.key),
            "value": _text(self.value, None if full and _fits(self.value, limit) else limit),
            "after_replay": self.after_replay,
        }
        if full:
            out["headers"] = self.headers
            out["original_headers"] = {k: _text(v) for k, v in self.original_headers}
            out["value_bytes"] = len(self.value or b"")
        return out


def _whole(text: str) -> bool:
    """ASCII digits only: `str.isdigit` also takes "²", which `int` refuses (headers are
    anyone's)."""
    return text.isascii() and text.isdigit()


def _text(raw: bytes | None, limit: int | None = None) -> Any:
    """Bytes as a reader wants them: JSON when they are (whole values only), text when they
    decode, else hex; cut to `limit` characters when given."""
    if raw is None:
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return {"hex": raw[:limit].hex() if limit else raw.hex()}
    if limit is not None:
        return _cut(text, limit)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return text


def _fits(raw: bytes | None, limit: int | None) -> bool:
    return limit is None or len(raw or b"") <= limit


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


async def read(
    settings: Settings,
    topics: Iterable[str] | None = None,
    error_type: str | None = None,
    since: datetime | None = None,
) -> list[DeadLetter]:
    """The dead letters of `topics` (default: every dead-letter topic), optionally of one
    reason and failed at or after `since`, oldest topic partition offsets first."""
    out: list[DeadLetter] = []
    for topic in [dlq_topic(x) for x in topics] if topics else [t.dlq(s) for s in DLQ_SOURCES]:
        for r in await read_stored(settings.kafka.bootstrap, topic):
            letter = DeadLetter.of(topic, r)
            if error_type and letter.error_type != error_type:
                continue
            if since and (letter.failed_at is None or letter.failed_at < since):
                continue
            out.append(letter)
    return out


def summarize(
    letters: list[DeadLetter], receipts: list[bytes | None] | None = None
) -> list[dict[str, Any]]:
    """Counts by topic and reason, with the oldest and newest failure and one sample each;
    how many failed again after a replay (the cause is not mended); with the ledger's
    `receipts` (one per letter), how many were replayed before."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, d in enumerate(letters):
        groups[d.topic, d.error_type].append(i)
    rows = []
    for (topic, reason), found in sorted(groups.items()):
        times = [t for i in found if (t := letters[i].failed_at)]
        row = {
            "topic": topic,
            "error_type": reason,
            "count": len(found),
            "oldest": min(times).isoformat() if times else None,
            "newest": max(times).isoformat() if times else None,
            "after_replay": sum(letters[i].after_replay for i in found),
            "sample": letters[found[0]].as_dict(),
        }
        if receipts is not None:
            row["replayed_before"] = sum(receipts[i] is not None for i in found)
        rows.append(row)
    return rows


async def remembered(settings: Settings, letters: list[DeadLetter]) -> list[DeadLetter]:
    """The letters whose namespace or session was not forgotten since: a forget leaves a
    letter's bytes in the broker's storage, never to be consumed again, and not shown."""
    from redis.asyncio import Redis

    redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
    try:
        return unforgotten(letters, await forgotten(redis, letters))
    finally:
        await redis.aclose()


def unforgotten(letters: list[DeadLetter], gone: list[bool]) -> list[DeadLetter]:
    return [d for d, stale in zip(letters, gone, strict=True) if not stale]


async def receipts_of(redis: Any, letters: list[DeadLetter]) -> list[bytes | None]:
    """The ledger's receipt of each letter (None: never replayed)."""
    if not letters:
        return []
    found: list[bytes | None] = await redis.hmget(REPLAYED_KEY, [d.ledger_field() for d in letters])
    return found


async def show(settings: Settings, topic: str, at: str) -> DeadLetter:
    """The dead letter at `PARTITION:OFFSET` (or OFFSET, when only one partition has it)."""
    partition, _, offset = at.rpartition(":")
    if not _whole(offset) or (partition and not _whole(partition)):
        raise DeadLetterError(f"{at!r} is not OFFSET or PARTITION:OFFSET")
    found = [
        d
        for d in await read(settings, [topic])
        if d.offset == int(offset) and (not partition or d.partition == int(partition))
    ]
    if not found:
        raise DeadLetterError(f"no dead letter at {at} in {dlq_topic(topic)}")
    shown = await remembered(settings, found)
    if not shown:  # said, so an operator does not look for it elsewhere
        raise DeadLetterError(
            f"the dead letter at {at} in {dlq_topic(topic)} is of a forgotten namespace: it is "
            "not shown, and not replayed"
        )
    if len(shown) > 1:
        where = ", ".join(d.id for d in shown)
        raise DeadLetterError(f"offset {offset} is in several partitions ({where}): name one")
    return shown[0]


@dataclass
class ReplayReport:
    replay_id: str
    dry_run: bool
    selected: int = 0
    replayed: list[dict[str, Any]] = field(default_factory=list)
    already: list[dict[str, Any]] = field(default_factory=list)  # skipped: replayed before
    not_copied: list[dict[str, Any]] = field(default_factory=list)  # value too large to copy
    forgotten: list[dict[str, Any]] = field(default_factory=list)  # its namespace was forgotten
    misdirected: list[dict[str, Any]] = field(default_factory=list)  # names a foreign source
    twins: list[dict[str, Any]] = field(default_factory=list)  # its message was sent for another

    def refusal(self) -> str | None:
        """Why a replay of this selection is refused (as a dry run, why it would be): every
        selected dead letter was replayed before, and only `force` replays them again."""
        if not self.already or self.replayed:
            return None
        # a letter of a replayed message that failed again knows its replay, not when
        times = sorted(a["replayed"]["at"] for a in self.already if "at" in a["replayed"])
        when = (
            f"first at {times[0]}"
            if times
            else f"by replay {self.already[0]['replayed']['replay_id']}, and failed again"
        )
        return (
            f"refused: the {len(self.already)} selected dead letters were replayed before ({when})"
        )


async def replay(
    settings: Settings,
    topic: str,
    error_type: str | None = None,
    since: datetime | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> ReplayReport:
    """Produce the selected dead letters back to their source topics, once each.

    The ledger is written after each message is acknowledged: a replay cut short replays
    only what it had not sent yet when run again (at-least-once, like every stage).

    A letter of a replayed message that failed again counts as replayed too: the same bytes
    fail the same way until the stage is mended, so only `force` sends them once more.
    Never replayed, even forced: a letter whose headers name another source than its
    dead-letter topic serves (`misdirected`), and one from before a forget of its namespace
    or session (`forgotten`): the forget fence is by position in `memory.exchanges`, and a
    replay would give the forgotten exchange a new position, after the fence.
    """
    from redis.asyncio import Redis

    letters = await read(settings, [topic], error_type, since)
    report = ReplayReport(uuid.uuid4().hex[:12], dry_run, selected=len(letters))
    redis = Redis.from_url(settings.redis.url, socket_timeout=10, socket_connect_timeout=10)
    publisher = KafkaPublisher.from_settings(settings)
    sent: dict[tuple[str, str, str], dict[str, Any]] = {}  # source position -> its replay
    try:
        done = await receipts_of(redis, letters)
        gone = await forgotten(redis, letters)
        for letter, receipt, stale in zip(letters, done, gone, strict=True):
            row = letter.as_dict()
            source = letter.source_position()
            if letter.misdirected:
                report.misdirected.append({**row, "named": letter.headers["source_topic"]})
            elif stale:
                report.forgotten.append(row)
            elif (before := replayed_before(letter, receipt)) is not None and not force:
                report.already.append({**row, "replayed": before})
            elif letter.value_dropped:
                report.not_copied.append(row)
            elif source in sent:  # every stage that read the message wrote a letter of it
                report.twins.append({**row, "as": sent[source]["id"]})
                if not dry_run:
                    twin = orjson.dumps(sent[source]["replayed"])
                    await redis.hset(REPLAYED_KEY, letter.ledger_field(), twin)
            else:
                report.replayed.append(
                    row if dry_run else await _send(publisher, redis, letter, report.replay_id)
                )
                if source is not None:
                    sent[source] = report.replayed[-1]
    finally:
        await publisher.stop()
        await redis.aclose()
    return report


def replayed_before(letter: DeadLetter, receipt: bytes | None) -> dict[str, Any] | None:
    """How the letter's message was replayed before, if it was: the ledger's receipt, or,
    for the letter of a replayed message that failed again, that replay (the same bytes fail
    the same way until the stage is mended)."""
    if receipt is not None:
        found: dict[str, Any] = orjson.loads(receipt)
        return found
    rid = next((v for k, v in letter.original_headers if k == REPLAY_HEADER), None)
    if rid is None:
        return None
    return {"replay_id": rid.decode(errors="replace"), "failed_again": True}


async def forgotten(redis: Any, letters: list[DeadLetter]) -> list[bool]:
    """Per letter: whether a forget of its namespace or session came after it was produced
    (a letter whose lineage is unknown counts as forgotten once any fence covers it)."""
    owners = [letter.owner() for letter in letters]
    items = [
        (owner[0], owner[1], letter.lineage())
        for letter, owner in zip(letters, owners, strict=True)
        if owner is not None
    ]
    stale = iter(await Fences(redis).stale(items) if items else [])
    return [next(stale) if owner is not None else False for owner in owners]


async def _send(
    publisher: KafkaPublisher, redis: Any, letter: DeadLetter, replay_id: str
) -> dict[str, Any]:
    kept = [(k, v) for k, v in letter.original_headers if k != REPLAY_HEADER]  # an earlier replay's
    headers = [*kept, (REPLAY_HEADER, replay_id.encode())]
    meta = await publisher.send_raw(letter.source_topic, letter.value, letter.key, headers=headers)
    receipt = {
        "replay_id": replay_id,
        "at": datetime.now(UTC).isoformat(),
        "to": f"{letter.source_topic} {meta.partition}:{meta.offset}",
    }
    await redis.hset(REPLAYED_KEY, letter.ledger_field(), orjson.dumps(receipt))
    metrics.DLQ_REPLAYED.labels(letter.source_topic, letter.error_type).inc()
    return {**letter.as_dict(), "replayed": receipt}


_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_since(text: str) -> datetime:
    """An ISO date or date-time (UTC when it names no zone), or an age such as 90m, 2h, 7d."""
    if m := _AGO.match(text.strip()):
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        try:
            return datetime.now(UTC) - timedelta(seconds=float(m.group(1)) * unit)
        except OverflowError:  # further back than any datetime: every letter
            return datetime.min.replace(tzinfo=UTC)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise DeadLetterError(
            f"--since {text!r}: give an ISO date or time, or an age like 2h"
        ) from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)
