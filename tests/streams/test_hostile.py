"""Hostile input on every input topic of the running stages (`lychee bench fuzz`, small N)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from schemas import Exchange
from schemas import topics as t
from streams.bench.fuzz import Generator, format_report, fuzz
from streams.client import MemoryClient
from streams.errors import MessageTooLarge
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_stored
from streams.stack.embedded import Stack
from tests.streams.batches import send_damaged
from tests.streams.test_pipeline import segments, store
from tests.waiting import eventually
from workers.store.listing import list_turns

pytestmark = pytest.mark.integration


async def test_fuzz_every_bad_message_accounted_for_nothing_good_lost_stages_alive(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    import random

    kinds = len(Generator("x", 4, 1, random.Random(0)).kinds())
    report = await fuzz(settings, kinds + 4, lambda: {c.name: c.alive for c in stack.children})
    text = format_report(report)
    assert report.lost == 0, text
    assert report.mismatched == [], text
    assert "NO" not in report.stages_alive, text
    assert (
        report.good_indexed == report.good_exchanges and report.good_answered == report.good_queries
    )
    assert report.dead_without_reason == 0
    # every way of being bad was exercised, and each has its own reason code
    assert len(report.bad_by_kind) >= kinds - 2  # `.first` halves are not counted as bad
    assert {
        "json",
        "schema",
        "schema_version",
        "null_value",
        "empty",
        "encoding",
        "too_large",
        "too_deep",
        "undecodable",
        "reply_partition",
    } <= set(report.dead_by_reason)
    assert report.error_replies >= 5 and report.dropped >= 1


@pytest.mark.parametrize("damage", ["crc", "header_key"])
async def test_a_batch_no_client_can_decode_on_a_reply_partition_does_not_stop_the_client(
    stack: Stack, settings, damage: str, unguarded: None
) -> None:  # type: ignore[no-untyped-def]
    async with MemoryClient(settings) as client:
        producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
        await producer.start()
        try:
            await send_damaged(producer, t.REPLIES, client.reply_partition, damage)
        finally:
            await producer.stop()
        reply = await client.search("hostile-replies", "what did Ann book?", k=3, timeout_s=60)
    assert reply.status == "ok"


def foreign_exchange(ns: str, seq: int, speaker: str, content: str) -> bytes:
    """An exchange as a client of another language writes it: plain JSON, nothing checked."""
    turn = {"role": "user", "speaker": speaker, "content": content, "turn_id": f"T{seq}"}
    return orjson.dumps(
        {"namespace": ns, "session_id": "s", "seq": seq, "exchange_id": f"e{seq}", "turns": [turn]}
    )


async def test_an_exchange_over_the_contract_is_dead_lettered_alone_and_its_session_goes_on(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    ns = f"long-{uuid.uuid4().hex[:6]}"
    within = "Here is the log you asked for:" + " " * 150_000 + "The last line says done."
    sent = [
        ("Ann", "I booked a flight to Lisbon for the third of May."),
        ("Bo", "z" * 250_000),  # over the contract's 200,000 characters, within 1 MiB
        ("Bo", "We adopted a grey cat and called her Pebble."),
        ("Bo", "y" * 1_200_000),  # over max_message_bytes: refused before it is parsed
        ("Ann", within),  # long, within the contract: stored whole
        ("Ann", "The airline moved my Lisbon flight to the fourth of May."),
    ]
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, max_request_size=4 << 20)
    await producer.start()
    offsets = {}
    try:
        for seq, (speaker, content) in enumerate(sent):
            md = await producer.send_and_wait(
                t.EXCHANGES, foreign_exchange(ns, seq, speaker, content), key=f"{ns}/s".encode()
            )
            offsets[seq] = md.offset
        end = {"kind": "end_session", "namespace": ns, "session_id": "s", "after_seq": 5}
        await producer.send_and_wait(t.EXCHANGES, orjson.dumps(end), key=f"{ns}/s".encode())
    finally:
        await producer.stop()
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=300)

    letters = {
        int(h["source_offset"]): h
        for r in await read_stored(stack.bootstrap, t.dlq(t.EXCHANGES))
        if r.key == f"{ns}/s".encode() and (h := dict(r.headers))
    }
    assert set(letters) == {offsets[1], offsets[3]}  # those two alone
    schema = letters[offsets[1]]
    assert schema["error_type"] == b"schema"
    assert b"turns.0.content" in schema["error"] and b"200000 characters" in schema["error"]
    too_large = letters[offsets[3]]
    assert (
        too_large["error_type"] == b"too_large"
        and b"LYCHEE_MAX_MESSAGE_BYTES" in too_large["error"]
    )

    # the exchanges before, between and after them: segmented, indexed, searchable
    kept = ["T0", "T2", "T4", "T5"]
    assert [tid for seg in await segments(stack, ns) for tid in seg.turn_ids] == kept
    rows = {r["turn_id"]: r for r in list_turns(store(stack).db, ns).items}
    assert sorted(rows) == kept and rows["T4"]["text"] == f"Ann: {within}"  # whole
    async with MemoryClient(settings) as client:
        reply = await client.search(ns, "What is the name of the cat?", k=3)
    assert any("T2" in e.turn_ids for e in reply.evidence)


async def test_our_client_refuses_an_exchange_over_the_stages_limit_before_sending_any(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    """What the stages would dead-letter after the broker's ack is the caller's error here."""
    ns = f"wide-{uuid.uuid4().hex[:6]}"
    small = Exchange.model_validate(orjson.loads(foreign_exchange(ns, 0, "Ann", "hello")))
    wide = Exchange.model_validate(orjson.loads(foreign_exchange(ns, 1, "Ann", "w" * 199_999)))
    wide = wide.model_copy(update={"turns": wide.turns * 6})
    async with MemoryClient(settings) as client:
        with pytest.raises(MessageTooLarge, match=r"exchange e1 makes a message of \d+ bytes"):
            await client.add([small, wide])
    stored = await read_stored(stack.bootstrap, t.EXCHANGES)
    assert not any(r.key == f"{ns}/s".encode() for r in stored)


async def test_a_control_message_every_stage_dead_lettered_is_replayed_once(
    stack: Stack, settings
) -> None:  # type: ignore[no-untyped-def]
    """Each stage that reads `memory.control` writes its own letter of a bad message; a
    replay sent all of them back, and each came back as that many letters again."""
    from streams.dlq import read, replay

    marker = uuid.uuid4().hex
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(t.CONTROL, b'{"garbage": "' + marker.encode() + b'"')
    finally:
        await producer.stop()

    async def mine() -> list[Any]:
        return [d for d in await read(settings, [t.CONTROL]) if marker.encode() in (d.value or b"")]

    # the segmenter, the encoder and the indexer read the control topic
    await eventually(mine, what="its three letters", until=lambda got: len(got) == 3)
    report = await replay(settings, t.CONTROL)
    sent = [r for r in report.replayed if marker in str(r["value"])]
    twins = [r for r in report.twins if marker in str(r["value"])]
    assert len(sent) == 1 and len(twins) == 2, (sent, twins)
    assert {r["as"] for r in twins} == {sent[0]["id"]}
    again = await replay(settings, t.CONTROL)  # every letter of it is in the ledger now
    assert not [r for r in again.replayed if marker in str(r["value"]) and not r["after_replay"]]


async def test_a_forgotten_namespaces_dead_letters_are_not_shown(stack: Stack, settings) -> None:  # type: ignore[no-untyped-def]
    from streams.dlq import read, remembered, show
    from streams.errors import DeadLetterError

    ns, marker = f"gone-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    bad = orjson.loads(foreign_exchange(ns, 0, "Ann", f"my card is {marker}"))
    bad["schema_version"] = 99  # refused by every reader: dead-lettered
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(t.EXCHANGES, orjson.dumps(bad), key=f"{ns}/s".encode())
    finally:
        await producer.stop()

    async def mine() -> list[Any]:
        return [
            d for d in await read(settings, [t.EXCHANGES]) if marker.encode() in (d.value or b"")
        ]

    letters = await eventually(mine, what="its letter", until=lambda got: len(got) == 1)
    assert await remembered(settings, letters) == letters
    async with MemoryClient(settings) as client:
        await client.forget(ns)
    assert await remembered(settings, await mine()) == []
    (letter,) = await mine()
    with pytest.raises(DeadLetterError, match="is of a forgotten namespace: it is not shown"):
        await show(settings, t.EXCHANGES, f"{letter.partition}:{letter.offset}")
