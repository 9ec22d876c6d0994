"""Forget fences in each stage against real Redis (and LanceDB): whatever order a stage meets
a forget and the data in, data from before the forget is dropped, data after it kept."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from schemas import (
    ControlKind,
    LogPosition,
    RawTurn,
    Role,
    Segment,
    SegmentMode,
    SessionControl,
)
from tests.workers.builders import HASH_DIM, HashEmbedder, batch
from tests.workers.encoder.test_llm_encoder import make_segment
from tests.workers.segmenter.test_service import TOPICS_A, TOPICS_B, exchanges, make, segments_of
from workers.encoder.encoders import ExtractiveEncoder
from workers.encoder.service import EncoderService
from workers.forget import SRC_HEADER, Fences, Source, segment_lineage, source_of
from workers.indexer.service import IndexBatch, IndexerService
from workers.ports import ListPublisher
from workers.segmenter.policy import Position
from workers.store import RECORDS, TURNS, EvidenceStore


def raw(ns: str, tid: str, emb: HashEmbedder) -> RawTurn:
    return RawTurn(
        namespace=ns,
        session_id="s1",
        turn_id=tid,
        exchange_id=tid,
        seq=0,
        index=0,
        role=Role.user,
        speaker="Ann",
        text=f"turn {tid}",
        session_date=datetime(2024, 3, 2),
        embedding=emb.embed([tid])[0].tolist(),
        embedding_model=emb.model_name,
    )


async def test_fences_source_below_namespace_or_session_fence_is_stale(redis) -> None:  # type: ignore[no-untyped-def]
    fences = Fences(redis)
    await fences.raise_to("a", None, {0: 10, 1: 4})
    await fences.raise_to("a", "s2", {0: 20})
    await fences.raise_to("a", None, {0: 7})  # fences never go down
    got = await fences.stale(
        [
            ("a", "s1", Source(0, 9)),
            ("a", "s1", Source(0, 10)),
            ("a", "s1", Source(1, 3)),
            ("a", "s2", Source(0, 15)),
            ("a", "s2", Source(0, 20)),
            ("a", "s1", None),
            ("b", "s1", None),
            ("a", "s1", Source(2, 0)),
        ]
    )
    assert got == [True, False, True, True, False, True, False, False]
    assert not [k async for k in redis.scan_iter(match="*a*") if b"fence" not in k]


def test_source_header_round_trip_and_garbage_is_none() -> None:
    assert source_of([Source(3, 42).header()]) == Source(3, 42)
    assert source_of([(SRC_HEADER, b"x:y")]) is None and source_of(None) is None


async def test_indexer_forget_first_then_old_turns_and_batches_are_dropped(
    redis, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    emb = HashEmbedder()
    store = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    svc = IndexerService(store, emb, Fences(redis))
    await svc.forget("a", None, {0: 10})
    seen: list[str] = []

    async def on_turns(turns: list[RawTurn]) -> None:
        seen.extend(x.turn_id for x in turns)

    written = await svc.write(
        IndexBatch(
            turns=[
                raw("a", "old", emb),
                raw("a", "new", emb),
                raw("a", "none", emb),
                raw("b", "other", emb),
            ],
            turn_sources=[Source(0, 9), Source(0, 10), None, None],
            records=[batch("a", 0, ["Ann kept the old boat"]), batch("a", 1, ["Ann sold it"])],
            record_sources=[Source(0, 2), Source(0, 11)],
        ),
        on_turns=on_turns,
    )
    assert written["turns"] == 2 and written["turns_forgotten"] == 2
    assert written["batches_forgotten"] == 1
    assert seen == ["new", "other"]
    assert store.turns.ids("a") == {"new"} and store.turns.ids("b") == {"other"}
    texts = {r["semantic_text"] for r in store.table(RECORDS).to_arrow().to_pylist()}  # type: ignore[union-attr]
    assert texts == {"Ann sold it"}
    assert store.count(TURNS) == 2


async def test_encoder_segment_below_fence_is_neither_encoded_nor_cached(redis) -> None:  # type: ignore[no-untyped-def]
    pub = ListPublisher()
    svc = EncoderService(redis, ExtractiveEncoder(), pub)
    await svc.fences.raise_to("ns", "s1", {0: 10})
    old, new = (
        make_segment(2),
        make_segment(2).model_copy(update={"segment_id": "ns/s1/1", "index": 1}),
    )
    out = await svc.handle([old, new], [Source(0, 3), Source(0, 12)])
    assert [b.segment_id for b in out] == ["ns/s1/1"]
    assert [source_of(m.headers) for m in pub.messages] == [Source(0, 12)]
    assert await redis.exists("lychee:enc:cache:ns/s1/0") == 0
    assert await redis.exists("lychee:enc:cache:ns/s1/1") == 1
    assert await svc.forget("ns", "s1") == 2  # the cached batch and the reference context
    assert [k async for k in redis.scan_iter(match="lychee:enc:*")] == []


async def test_segmenter_exchanges_below_fence_leave_no_state_and_later_ones_start_afresh(
    redis, embedder
) -> None:  # type: ignore[no-untyped-def]
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges("ns1", "s1")
    await svc.handle(exs[:2], [Position(0, 0), Position(0, 1)])
    # the state and its turn ids (the outbox was published)
    assert await svc.forget("ns1", None, {0: 5}) == 2
    assert [k async for k in redis.scan_iter(match="*ns1*")] == []
    pub.messages.clear()
    old = await svc.handle(exs[2:4], [Position(0, 3), Position(0, 4)])  # sent before, read after
    assert old.forgotten == 2 and pub.messages == []
    assert [k async for k in redis.scan_iter(match="*ns1*")] == []
    new = await svc.handle(exs[:1], [Position(0, 5)])  # after the forget: a new session
    assert new.forgotten == 0 and new.turns == 1
    assert [source_of(m.headers) for m in pub.messages] == [Source(0, 5)]


async def test_segmenter_commit_of_state_begun_before_a_fence_wipes_it(redis, embedder) -> None:  # type: ignore[no-untyped-def]
    """The fence is raised between the batch's check and its commit: the commit script
    refuses the old state, and the message, being old too, is dropped."""
    svc = make(redis, embedder)
    exs = exchanges("ns1", "s1")
    await svc.handle(exs[:1], [Position(0, 0)])
    fences = svc.store.fences
    real = fences.stale

    async def late_fence(items):  # type: ignore[no-untyped-def]
        out = await real(items)
        await fences.raise_to("ns1", None, {0: 9})
        return out

    fences.stale = late_fence  # type: ignore[method-assign]
    result = await svc.handle(exs[1:2], [Position(0, 1)])
    assert result.decisions[0].action == "forgotten"
    assert [k async for k in redis.scan_iter(match="*ns1*")] == []


async def redis_values(redis) -> bytes:  # type: ignore[no-untyped-def]
    """Every value in Redis, concatenated: what a text left behind would show up in."""
    out = []
    async for key in redis.scan_iter(count=1000):
        kind = (await redis.type(key)).decode()
        if kind == "hash":
            out += [v for kv in (await redis.hgetall(key)).items() for v in kv]
        elif kind == "stream":
            out += [v for _, fields in await redis.xrange(key) for kv in fields.items() for v in kv]
        elif kind == "zset":
            out += await redis.zrange(key, 0, -1)
        elif kind == "string":
            out.append(await redis.get(key))
    return b"\n".join(out)


async def test_segmenter_forget_cuts_a_state_at_the_fence_and_keeps_what_came_after(
    redis, embedder
) -> None:  # type: ignore[no-untyped-def]
    """An exchange produced after the forget but read before the segmenter saw it, in a session
    begun before: it becomes a segment of its own (lineage: its own position), nothing from
    before the fence stays in Redis, and segment numbers go on (no id is reused)."""
    pub = ListPublisher()
    svc = make(redis, embedder, pub, mode=SegmentMode.fixed_window)  # no semantic cut
    exs = exchanges("ns1", "s1", TOPICS_A)
    await svc.handle(exs, [Position(0, 0), Position(0, 1), Position(0, 7)])
    _, state = await svc.store.load("ns1/s1")
    assert state is not None and [x.seq for x in state.exchanges] == [0, 1, 2]
    pub.messages.clear()
    await svc.forget("ns1", None, {0: 5})
    (seg,) = segments_of(pub)
    assert [x.exchange_id for x in seg.exchanges] == ["s1:2"] and seg.index == 0
    assert [source_of(m.headers) for m in pub.messages] == [Source(0, 7)]
    left = await redis_values(redis)
    assert TOPICS_A[2].encode() not in left  # published, so the outbox is empty
    assert not any(text.encode() in left for text in TOPICS_A[:2])

    pub.messages.clear()
    later = exchanges("ns1", "s1", TOPICS_B)
    await svc.handle(
        [x.model_copy(update={"seq": x.seq + 3}) for x in later], [Position(0, 8), Position(0, 9)]
    )
    await svc.handle([SessionControl(kind=ControlKind.flush, namespace="ns1", session_id="s1")])
    assert [s.index for s in segments_of(pub)] == [1]
    assert {source_of(m.headers) for m in pub.messages if m.topic == "memory.segments"} == {
        Source(0, 8)
    }


async def test_segmenter_next_message_cuts_a_state_a_fence_was_raised_under(
    redis, embedder
) -> None:  # type: ignore[no-untyped-def]
    """Another stage raised the fence first: the segmenter's next commit for the session
    finds its state begun before it and cuts it there, then applies the message."""
    pub = ListPublisher()
    svc = make(redis, embedder, pub, mode=SegmentMode.fixed_window)
    exs = exchanges("ns1", "s1", TOPICS_A + TOPICS_B)
    await svc.handle(exs[:3], [Position(0, 0), Position(0, 1), Position(0, 7)])
    await svc.store.fences.raise_to("ns1", None, {0: 5})
    pub.messages.clear()
    result = await svc.handle(exs[3:4], [Position(0, 8)])
    assert result.forgotten == 0 and result.turns == 1
    (seg,) = segments_of(pub)
    assert [x.exchange_id for x in seg.exchanges] == ["s1:2"]
    _, state = await svc.store.load("ns1/s1")
    assert state is not None and [x.seq for x in state.exchanges] == [3]
    assert state.first_offset == 7 and state.next_index == 1
    left = await redis_values(redis)
    assert not any(text.encode() in left for text in TOPICS_A[:2])


def placed(seg: Segment, partition: int, offsets: tuple[int, ...]) -> Segment:
    """`seg` with its exchanges read at these offsets of one partition."""
    exchanges = [
        x.model_copy(update={"source": LogPosition(partition=partition, offset=o)})
        for x, o in zip(seg.exchanges, offsets, strict=True)
    ]
    return seg.model_copy(update={"exchanges": exchanges})


def test_segment_lineage_is_its_earliest_exchange_and_unknown_when_any_is() -> None:
    seg = make_segment(3)
    assert segment_lineage(placed(seg, 1, (9, 4, 6))) == Source(1, 4)
    assert segment_lineage(seg) is None
    two = placed(seg, 1, (9, 4, 6)).exchanges[:1] + placed(seg, 2, (1, 1, 1)).exchanges[1:2]
    assert segment_lineage(seg.model_copy(update={"exchanges": two})) is None


async def test_indexer_forget_after_newer_rows_keeps_them(redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The indexer wrote turns and records of exchanges sent after a forget before it read
    that forget: the forget removes only the older rows."""
    emb = HashEmbedder()
    store = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM)
    svc = IndexerService(store, emb, Fences(redis))
    await svc.write(
        IndexBatch(
            turns=[raw("a", "old", emb), raw("a", "new", emb)],
            turn_sources=[Source(0, 9), Source(0, 10)],
            records=[batch("a", 0, ["Ann kept the old boat"]), batch("a", 1, ["Ann sold it"])],
            record_sources=[Source(0, 2), Source(0, 11)],
        )
    )
    await svc.forget("a", None, {0: 10})
    assert store.turns.ids("a") == {"new"}
    texts = {r["semantic_text"] for r in store.table(RECORDS).to_arrow().to_pylist()}  # type: ignore[union-attr]
    assert texts == {"Ann sold it"}


async def test_encoder_encodes_only_the_part_of_a_segment_from_after_the_fence(redis) -> None:  # type: ignore[no-untyped-def]
    """A segment cut before the segmenter saw a forget holds exchanges from both sides of its
    fence: the older ones are not encoded, the newer ones are, with their own lineage."""
    pub = ListPublisher()
    svc = EncoderService(redis, ExtractiveEncoder(), pub)
    seg = placed(make_segment(3), 0, (3, 4, 12))
    await svc.fences.raise_to("ns", None, {0: 10})
    (out,) = await svc.handle([seg], [segment_lineage(seg)])
    assert (out.first_turn_id, out.last_turn_id) == ("t2a", "t2b") and out.records
    for r in out.records:
        assert set(r.evidence) <= {"t2a", "t2b"}
        assert not any(f"{name} {i}" in r.semantic_text for name in ("Rex", "Ines") for i in (0, 1))
    assert [source_of(m.headers) for m in pub.messages] == [Source(0, 12)]
