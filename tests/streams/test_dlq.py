"""Dead letters brought back (issue 24): segments the encoder dead-lettered (an LLM reply
still invalid after the repair) are listed, shown, and replayed once the endpoint is mended;
the records equal an undisturbed run's; a second replay is refused and duplicates nothing."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from schemas import Segment
from schemas import topics as t
from streams.bench.llm_faults import VALID_REPLY, encoder_env, segment
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.kafka.topics import ensure_topics
from streams.stack.embedded import Stack
from streams.status import metrics_endpoints
from tests.fakes.openai_server import FakeOpenAI, text, valid
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
FAST = {
    "LYCHEE_LLM_MAX_ATTEMPTS": "1",
    "LYCHEE_LLM_TIMEOUT_S": "10",
    "LYCHEE_TRANSIENT_MAX_WAIT_S": "1",
    "LYCHEE_PAUSE_LOG_INTERVAL_S": "5",
}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, FakeOpenAI]]:
    server = FakeOpenAI(default_reply=text("Sure! Here are the records you asked for.")).start()
    stack = Stack(tmp_path_factory.mktemp("dlq"))
    try:
        stack.start_infra()
        asyncio.run(ensure_topics(stack.bootstrap, 4))
        for stage in ("segmenter", "encoder", "indexer"):  # the indexer: `ingest --wait` drains
            stack.start_worker(stage, encoder_env(server.url, FAST))
        yield stack, server
    finally:
        stack.stop()
        server.stop()


def lychee(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **stack.env(), "LYCHEE_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


async def send(bootstrap: str, segs: list[Segment]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for s in segs:
            key = f"{s.namespace}/{s.session_id}".encode()
            await producer.send_and_wait(
                t.SEGMENTS,
                s.model_dump_json().encode(),
                key=key,
                headers=[("client-trace", b"t-" + s.session_id.encode())],
            )
    finally:
        await producer.stop()


async def wait_for(read: Any, n: int, timeout_s: float = 240) -> list[Any]:
    found: list[Any] = await eventually(
        read,
        what=f"{n} messages",
        until=lambda got: len(got) >= n,
        timeout_s=timeout_s,
        interval_s=1,
    )
    return found


async def encoder_drained(stack: Stack) -> None:
    async with LagReader(stack.bootstrap) as lag:
        await lag.wait_drained(("encoder",), timeout_s=240)


def records_of(batches: list[Any]) -> dict[str, list[str]]:
    """Per session: the records' texts, namespace left out (two runs write two namespaces)."""
    out: dict[str, list[str]] = {}
    for _, value, _ in batches:
        batch = json.loads(value)
        out[batch["segment_id"].split("/", 1)[1]] = sorted(
            r["semantic_text"] for r in batch["records"]
        )
    return out


def replayed_metric(stack: Stack) -> float:
    async def scrape() -> float:
        total = 0.0
        async with httpx.AsyncClient(timeout=5) as client:
            for ep in await metrics_endpoints(stack.settings()):
                body = (await client.get(ep["url"])).text
                for family in text_string_to_metric_families(body):
                    if family.name == "lychee_messages_replayed":
                        total += sum(
                            s.value
                            for s in family.samples
                            if s.labels.get("stage") == "encoder" and s.name.endswith("_total")
                        )
        return total

    return asyncio.run(scrape())


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_dlq_list_show_replay_then_a_second_replay_is_refused(
    encoder: tuple[Stack, FakeOpenAI],
) -> None:
    stack, server = encoder
    broken_ns, calm_ns = f"dlq-{uuid.uuid4().hex[:6]}", f"calm-{uuid.uuid4().hex[:6]}"
    segs = [segment(broken_ns, i) for i in range(3)]
    asyncio.run(send(stack.bootstrap, segs))
    dead = asyncio.run(
        wait_for(lambda: read_topic(stack.bootstrap, t.dlq(t.SEGMENTS), broken_ns), 3)
    )
    assert len(dead) == 3

    listed = lychee(stack, "dlq", "list", "memory.segments", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["error_type"] == "unprocessable"]
    assert row["count"] >= 3 and "still invalid after one repair" in row["sample"]["error"]
    shown = lychee(stack, "dlq", "show", "memory.segments.dlq", row["sample"]["id"])
    assert shown.returncode == 0, shown.stderr
    letter = json.loads(shown.stdout)
    assert letter["value"]["segment_id"].startswith(("dlq-", "calm-"))  # the original, decoded
    assert letter["headers"]["source_topic"] == "memory.segments"
    assert letter["original_headers"]["client-trace"].startswith("t-s")

    server.default_reply = valid(VALID_REPLY)  # the endpoint mended
    asyncio.run(send(stack.bootstrap, [segment(calm_ns, i) for i in range(3)]))  # undisturbed
    calm = asyncio.run(wait_for(lambda: read_topic(stack.bootstrap, t.RECORDS, key=calm_ns), 3))

    dry = lychee(
        stack, "dlq", "replay", "memory.segments", "--error-type", "unprocessable", "--dry-run"
    )
    assert dry.returncode == 0 and "would replay 3 of 3" in dry.stdout, dry.stdout + dry.stderr
    replay = lychee(stack, "dlq", "replay", "memory.segments", "--error-type", "unprocessable")
    assert replay.returncode == 0 and "replayed 3 of 3" in replay.stdout, (
        replay.stdout + replay.stderr
    )
    got = asyncio.run(wait_for(lambda: read_topic(stack.bootstrap, t.RECORDS, key=broken_ns), 3))
    assert records_of(got) == records_of(calm)

    async def segment_ends() -> int:
        async with LagReader(stack.bootstrap) as lag:
            return sum((await lag.end_offsets(t.SEGMENTS)).values())

    before = asyncio.run(segment_ends())
    again = lychee(stack, "dlq", "replay", "memory.segments", "--error-type", "unprocessable")
    assert again.returncode == 1 and "refused" in again.stderr, again.stdout + again.stderr
    assert asyncio.run(segment_ends()) == before  # nothing produced
    none = lychee(stack, "dlq", "replay", "memory.segments", "--error-type", "nosuchtype")
    assert none.returncode == 0, none.stderr
    assert none.stdout.startswith(
        "nothing to replay: no dead letters of memory.segments of type nosuchtype (its types: "
    ), none.stdout
    assert "unprocessable" in none.stdout and "(replay " not in none.stdout
    # the encoder commits a segment after publishing its records: once it has committed
    # every segment, every record it will write for them is in the topic
    asyncio.run(encoder_drained(stack))
    assert len(asyncio.run(read_topic(stack.bootstrap, t.RECORDS, key=broken_ns))) == 3
    assert replayed_metric(stack) == 3


def test_dlq_topic_accepts_a_source_or_its_dlq_and_names_the_sources_otherwise() -> None:
    from streams.dlq import dlq_topic
    from streams.errors import DeadLetterError

    assert dlq_topic("memory.segments") == dlq_topic("memory.segments.dlq") == "memory.segments.dlq"
    with pytest.raises(DeadLetterError, match="the sources are memory.exchanges"):
        dlq_topic("memory.replies")


def test_dlq_since_takes_an_age_or_an_iso_time() -> None:
    from datetime import UTC, datetime, timedelta

    from streams.dlq import parse_since
    from streams.errors import DeadLetterError

    assert abs(parse_since("2h") - (datetime.now(UTC) - timedelta(hours=2))) < timedelta(seconds=5)
    assert parse_since("2026-11-01") == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(DeadLetterError, match="an age like 2h"):
        parse_since("yesterday-ish")


def test_dlq_letter_restores_the_original_headers_and_reads_ours() -> None:
    from streams.dlq import DeadLetter
    from streams.kafka.reader import Stored

    stored = Stored(
        2,
        7,
        b"ns/s1",
        b'{"a": 1}',
        (
            ("error", b"schema: turns.0.role"),
            ("error_type", b"schema"),
            ("source_topic", b"memory.exchanges"),
            ("failed_at_ms", b"1700000000000"),
            ("original.lychee-src", b"abc"),
            ("original.error", b"a client's own header"),
        ),
        0,
    )
    letter = DeadLetter.of("memory.exchanges.dlq", stored)
    assert letter.id == "2:7" and letter.error_type == "schema"
    assert letter.original_headers == (("lychee-src", b"abc"), ("error", b"a client's own header"))
    assert letter.source_topic == "memory.exchanges"
    assert letter.as_dict(full=True)["value"] == {"a": 1}


@pytest.mark.parametrize(
    ("key", "value", "owner"),
    [
        (b"ns/s1", b'{"namespace": "other", "session_id": "s9"}', ("other", "s9")),
        (b"ns/s1", b'{"namespace": "ns", "this is": not json', ("ns", "s1")),
        (b"ns", b"\xff\xfe raw bytes", ("ns", None)),  # keyed by namespace (queries, control)
        (b"bad name!/s1", b"not json", None),
        (None, b"not json", None),
        # no key, and no JSON reader takes the value: the namespace its words name
        (None, b'\xef\xbb\xbf{"namespace": "fx", "session_id": "s3"}', ("fx", "s3")),
        (None, b'{"namespace":"fx","turns":[{"content":"\xff"}]}', ("fx", None)),
        (None, b'{"namespace": "bad name!"', None),
        (None, b'[{"namespace": "victim"}]', None),  # JSON: only its own namespace counts
    ],
)
def test_dlq_a_letter_belongs_to_its_values_namespace_else_to_its_keys(
    key: bytes | None, value: bytes, owner: tuple[str, str | None] | None
) -> None:
    """So a forget of the namespace hides a letter whose value is no JSON object too."""
    from streams.dlq import DeadLetter
    from streams.kafka.reader import Stored

    letter = DeadLetter.of("memory.exchanges.dlq", Stored(0, 1, key, value, (), 0))
    assert letter.owner() == owner


def test_dlq_letter_shows_the_start_of_a_large_value_unless_asked_for_all() -> None:
    from streams.dlq import DeadLetter
    from streams.kafka.reader import Stored

    big = b"x" * 10_000
    letter = DeadLetter.of(
        "memory.exchanges.dlq", Stored(0, 1, None, big, (("error_type", b"too_large"),), 0)
    )
    shown = letter.as_dict(full=True, limit=4000)
    assert shown["value_bytes"] == 10_000 and len(shown["value"]) < 4100
    assert letter.as_dict(full=True, limit=None)["value"] == big.decode()


def test_dlq_summary_counts_replayed_before_and_failed_again_after_a_replay() -> None:
    from streams.dlq import DeadLetter, summarize
    from streams.kafka.reader import Stored

    def letter(offset: int, *extra: tuple[str, bytes]) -> DeadLetter:
        headers = (
            ("error_type", b"json"),
            ("failed_at_ms", str(1_700_000_000_000 + offset).encode()),
            *extra,
        )
        return DeadLetter.of("memory.exchanges.dlq", Stored(0, offset, None, b"{", headers, 0))

    letters = [letter(0), letter(1, ("original.lychee-replay", b"r1")), letter(2)]
    (row,) = summarize(letters, [b'{"replay_id": "r1"}', None, None])
    assert (row["count"], row["replayed_before"], row["after_replay"]) == (3, 1, 1)
    assert row["oldest"] < row["newest"] and row["sample"]["id"] == "0:0"
    assert "replayed_before" not in summarize(letters)[0]  # without the ledger: not known


def test_dlq_replay_is_refused_only_when_every_selected_letter_was_replayed_before() -> None:
    from streams.dlq import ReplayReport

    before = {"id": "0:0", "replayed": {"at": "2026-11-25T10:00:00+00:00"}}
    assert ReplayReport("r", False, 1, already=[before]).refusal() == (
        "refused: the 1 selected dead letters were replayed before (first at "
        "2026-11-25T10:00:00+00:00)"
    )
    assert ReplayReport("r", False, 2, replayed=[{"id": "0:1"}], already=[before]).refusal() is None
    assert ReplayReport("r", False, 0).refusal() is None  # nothing selected: nothing refused
    # the letter of a replay that failed again, read first, knows its replay but not when
    again = {"id": "2:0", "replayed": {"replay_id": "r1", "failed_again": True}}
    assert ReplayReport("r", False, 2, already=[again, before]).refusal() == (
        "refused: the 2 selected dead letters were replayed before (first at "
        "2026-11-25T10:00:00+00:00)"
    )
    assert ReplayReport("r", False, 1, already=[again]).refusal() == (
        "refused: the 1 selected dead letters were replayed before (by replay r1, and failed again)"
    )


def test_dlq_a_letter_with_headers_no_datetime_holds_reads_as_unknown() -> None:
    """Headers are anyone's: one hostile letter must not break the whole listing."""
    from streams.dlq import DeadLetter, parse_since
    from streams.kafka.reader import Stored

    for ms in (b"99999999999999999999", "\u00b2".encode()):
        headers = (("failed_at_ms", ms), ("source_partition", "\u00b2".encode()))
        letter = DeadLetter.of("memory.segments.dlq", Stored(0, 1, None, b"x", headers, 0))
        assert letter.failed_at is None and letter.source_position() is None
        assert letter.as_dict()["failed_at"] is None
    assert parse_since("99999999999d").year == 1  # further back than any date: every letter


def test_dlq_one_message_read_by_several_stages_is_one_source_position() -> None:
    from streams.dlq import DeadLetter
    from streams.kafka.reader import Stored

    def letter(offset: int, stage: bytes) -> DeadLetter:
        headers = (("stage", stage), ("source_partition", b"0"), ("source_offset", b"41"))
        return DeadLetter.of("memory.control.dlq", Stored(0, offset, None, b"{", headers, 0))

    first, second = letter(5, b"segmenter"), letter(6, b"indexer")
    assert first.source_position() == second.source_position() == ("memory.control", "0", "41")
    assert first.ledger_field() != second.ledger_field()


def test_dlq_a_letter_of_a_replay_that_failed_again_counts_as_replayed_before() -> None:
    """Replaying it again without --force would send the same bytes to fail the same way
    (and add one more letter each time)."""
    from streams.dlq import DeadLetter, replayed_before
    from streams.kafka.reader import Stored

    def letter(*extra: tuple[str, bytes]) -> DeadLetter:
        headers = (("error_type", b"json"), *extra)
        return DeadLetter.of("memory.exchanges.dlq", Stored(0, 3, None, b"{", headers, 0))

    assert replayed_before(letter(), None) is None
    assert replayed_before(letter(), b'{"replay_id": "r0"}') == {"replay_id": "r0"}
    again = letter(("original.lychee-replay", b"r1"))
    assert replayed_before(again, None) == {"replay_id": "r1", "failed_again": True}


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_ingest_wait_names_what_a_stage_dead_lettered_of_the_file(
    encoder: tuple[Stack, FakeOpenAI], tmp_path: Path
) -> None:
    """The broker took every exchange, and the encoder dead-lettered the segment they made
    (the LLM's reply unusable): `--wait` names the letter and fails instead of "indexed"."""
    stack, server = encoder
    server.default_reply = text("Sure! Here are the records you asked for.")  # broken again
    ns = f"wait-{uuid.uuid4().hex[:6]}"
    lines = [
        {
            "namespace": ns,
            "session_id": "s1",
            "session_date": "2024-03-02T18:00:00",
            "turns": [{"role": "user", "content": f"I moved to Lisbon in {year}."}],
        }
        for year in (2019, 2021)
    ]
    path = tmp_path / "talk.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    out = lychee(stack, "ingest", str(path), "--format", "jsonl", "--wait", "--timeout", "240")

    assert out.returncode == 1, out.stdout + out.stderr
    assert "indexed" not in out.stdout, out.stdout
    assert "dead-lettered: memory.segments.dlq " in out.stderr, out.stderr
    assert f"({ns}/s1) by the encoder: unprocessable: " in out.stderr, out.stderr
    assert re.search(r"\d+ messages? of \S+ sessions dead-lettered", out.stderr), out.stderr
    assert "NOT indexed" in out.stderr, out.stderr
    # a letter of another namespace, written before, is not this file's
    assert "dlq-" not in out.stderr and "calm-" not in out.stderr, out.stderr
