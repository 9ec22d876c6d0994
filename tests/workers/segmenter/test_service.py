"""The segmenter stage against real Redis and the real MiniLM model, no broker."""

from __future__ import annotations

import asyncio
from datetime import datetime

import numpy as np
import orjson
import pytest

from schemas import ControlKind, Exchange, RawTurn, Role, Segment, SessionControl, Turn
from schemas import topics as t
from workers.errors import Unprocessable
from workers.ports import ListPublisher, OutMessage
from workers.segmenter.params import SegmenterParams
from workers.segmenter.policy import Position, SegmentPolicy
from workers.segmenter.service import SegmenterService
from workers.segmenter.state_store import SessionStore
from workers.tokens import count_tokens

TOPICS_A = [
    "We trained for the half-marathon this morning, twelve kilometres at an easy pace.",
    "My knee felt fine after the long run, so the new shoes are working.",
    "Next week the plan says fourteen kilometres with four fast intervals.",
]
TOPICS_B = [
    "The sourdough starter finally doubled overnight after I fed it rye flour.",
    "I baked two loaves and the crumb was open and a little sour.",
]


def exchanges(ns: str = "ns1", sid: str = "s1", texts: list[str] | None = None) -> list[Exchange]:
    texts = texts or TOPICS_A + TOPICS_B
    return [
        Exchange(
            namespace=ns,
            session_id=sid,
            seq=i,
            exchange_id=f"{sid}:{i}",
            session_date=datetime(2024, 3, 2, 18, 0),
            turns=[
                Turn(
                    role=Role.user,
                    speaker="Ann" if i % 2 else "Bo",
                    content=text,
                    turn_id=f"{sid}-t{i}",
                )
            ],
        )
        for i, text in enumerate(texts)
    ]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def make(redis, embedder, publisher=None, clock=None, **params) -> SegmenterService:  # type: ignore[no-untyped-def]
    p = SegmenterParams(**params)
    policy = SegmentPolicy(p, p.calibration_for(embedder.model_name), count_tokens)
    return SegmenterService(
        SessionStore(redis), embedder, policy, publisher or ListPublisher(), clock=clock or Clock()
    )


def segments_of(pub: ListPublisher) -> list[Segment]:
    return [Segment.model_validate_json(m.value) for m in pub.messages if m.topic == t.SEGMENTS]


def turn_ids_of(pub: ListPublisher) -> list[str]:
    return [orjson.loads(m.value)["turn_id"] for m in pub.messages if m.topic == t.TURNS]


async def test_segmenter_service_publishes_turns_at_once_and_segments_on_flush(
    redis, embedder
) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    await svc.handle(exchanges())
    assert turn_ids_of(pub) == [f"s1-t{i}" for i in range(5)]
    before = len(segments_of(pub))
    await svc.handle([SessionControl(kind=ControlKind.flush, namespace="ns1", session_id="s1")])
    segs = segments_of(pub)
    assert len(segs) > before
    assert segs[-1].reason.value == "session_flush"
    covered = [tid for s in segs for tid in s.turn_ids]
    assert covered == [f"s1-t{i}" for i in range(5)]  # every turn once, in order
    assert [s.segment_id for s in segs] == [f"ns1/s1/{i}" for i in range(len(segs))]


async def test_segmenter_service_turns_say_which_one_closes_their_exchange(redis, embedder) -> None:
    ex = exchanges()[0]
    two = ex.model_copy(
        update={"turns": [*ex.turns, Turn(role=Role.assistant, content="Easy pace is right.")]}
    )
    pub = ListPublisher()
    await make(redis, embedder, pub).handle([two])
    turns = [RawTurn.model_validate_json(m.value) for m in pub.messages if m.topic == t.TURNS]
    assert [(x.index, x.exchange_turns, x.closes_exchange()) for x in turns] == [
        (0, 2, False),
        (1, 2, True),
    ]


async def test_segmenter_service_replayed_seq_changes_nothing(redis, embedder) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    await svc.handle(exchanges())
    state_before = await redis.hgetall("lychee:seg:{ns1/s1}:state")
    published = len(pub.messages)
    result = await svc.handle(exchanges())  # the same exchanges again, e.g. after a rebalance
    assert result.replays == 5 and result.segments == 0
    assert await redis.hgetall("lychee:seg:{ns1/s1}:state") == state_before
    assert len(pub.messages) == published


async def test_segmenter_service_out_of_order_exchange_is_refused_by_name(redis, embedder) -> None:
    """Seq 1 after seq 2: behind the fence, but the session never had it, so no replay: it
    changes nothing and is refused with the reason (a dead letter), not dropped unseen."""
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle([exs[0], exs[2]])
    with pytest.raises(Unprocessable, match="has seq 1, at or below seq 2 applied already"):
        await svc.handle([exs[1]])
    assert "s1-t1" not in turn_ids_of(pub)
    assert (await svc.handle([exs[2]])).replays == 1  # what it had: a replay, as before


async def test_segmenter_service_other_words_under_an_applied_seq_are_refused_by_name(
    redis, embedder
) -> None:
    """Two producers numbering one session alike (the gateway's seqs after what is applied,
    beside a producer of its own): the second exchange at a seq is no replay of the first."""
    svc = make(redis, embedder)
    exs = exchanges()
    await svc.handle(exs[:3])
    turn = Turn(role=Role.user, content="A gateway's own words.")
    other = exs[1].model_copy(update={"exchange_id": "gateway-7", "turns": [turn]})
    with pytest.raises(Unprocessable, match="'gateway-7'.*never had its turn 'gateway-7#0'"):
        await svc.handle([other])
    reworded = exs[1].model_copy(
        update={"turns": [exs[3].turns[0].model_copy(update={"turn_id": "s1-t1"})]}
    )
    with pytest.raises(Unprocessable, match="never had its turn 's1-t1' \\(or had other words"):
        await svc.handle([reworded])


async def test_segmenter_service_a_replay_stays_one_when_the_sessions_turn_ids_are_gone(
    redis, embedder
) -> None:
    """The turn ids expire (30 days) while the seq state lives on, and a forget that cuts a
    session deletes them: a seq behind the fence is then taken for the replay it was."""
    svc = make(redis, embedder)
    exs = exchanges()
    await svc.handle(exs[:3])
    await redis.delete("lychee:seg:{ns1/s1}:turns")
    assert (await svc.handle([exs[1]], [Position(0, 99)])).replays == 1


async def test_segmenter_service_late_exchange_from_another_partition_is_refused_by_name(
    redis, embedder
) -> None:
    """Two producers placing one session on two partitions: seq 1 read before seq 0. Seq 0
    is no replay (its log never held it before), so it is refused with the reason, for the
    dead letters, not dropped; on the session's own partition too (the session never had
    it), while seq 1 again is a replay."""
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle([exs[1]], [Position(9, 0)])
    with pytest.raises(
        Unprocessable,
        match="seq 0 of session ns1/s1 came on partition 6 after "
        "seq 1 had come on partition 9.*murmur2",
    ):
        await svc.handle([exs[0]], [Position(6, 0)])
    with pytest.raises(Unprocessable, match="never had its turn"):  # on its own partition
        await svc.handle([exs[0]], [Position(9, 1)])
    assert (await svc.handle([exs[1]], [Position(9, 2)])).replays == 1


async def test_segmenter_service_turn_id_reused_with_other_words_is_refused_by_name(
    redis, embedder
) -> None:
    """A producer writing to Kafka directly reuses a turn id (or an exchange id, whose turns
    take it) with other words: refused, so the stored turn is not replaced; the same words
    again (a redelivery, a retry) pass; a forget of the session frees its ids."""
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle(exs[:2])
    other = exs[2].model_copy(
        update={"turns": [exs[2].turns[0].model_copy(update={"turn_id": "s1-t0"})]}
    )
    with pytest.raises(Unprocessable, match="turn_id 's1-t0' of session ns1/s1 names a turn"):
        await svc.handle([other])
    assert [
        m
        for m in pub.messages
        if b"s1-t0" in m.value and exs[2].turns[0].content.encode() in m.value
    ] == []
    again = exs[2].model_copy(update={"exchange_id": "s1:9", "seq": 2})
    await svc.handle([again])  # its own id, new words: fine
    assert await redis.exists("lychee:seg:{ns1/s1}:turns")
    await svc.store.fences.raise_to("ns1", "s1", {})
    await svc.store.forget("ns1", "s1")
    assert not await redis.exists("lychee:seg:{ns1/s1}:turns")


async def test_segmenter_service_forget_keeps_the_gateways_seqs_rising(redis, embedder) -> None:
    """Exchanges the gateway numbered before a forget may still be unread by the segmenter
    (another topic than the forget's): after it the gateway numbers on above them, or the
    exchanges added next would be dropped as their replays. No key names the namespace, and
    a caller's own numbering may start again from 0."""
    from streams.errors import SeqRejected
    from streams.seqs import SeqAllocator, Wanted

    alloc = SeqAllocator(redis, ttl_s=3600, lease_s=5.0)

    async def allocate(wanted: list[Wanted]) -> list[int]:
        deadline = asyncio.get_running_loop().time() + 5
        async with alloc.session("forgotten-ns", "s1", deadline) as s, s.ordered():
            return [a.seq for a in await s.allocate(wanted)]

    assert await allocate([Wanted(f"e{i}") for i in range(6)]) == [0, 1, 2, 3, 4, 5]
    svc = make(redis, embedder)
    assert await svc.forget("forgotten-ns", None, {0: 0}) >= 2  # the gateway's ids and meta
    assert [k async for k in redis.scan_iter(match="*forgotten-ns*")] == []
    assert await allocate([Wanted("again-0", 0)]) == [0]
    assert await allocate([Wanted("e6"), Wanted("e7")]) == [6, 7]
    with pytest.raises(SeqRejected):  # now below seqs given and still on their way
        await allocate([Wanted("again-1", 1)])


async def test_segmenter_service_forget_frees_the_gateways_ids_below_the_fence_only(
    redis, embedder
) -> None:
    """A forget frees the gateway's ids of the exchanges below its fence (re-adding one is
    new, its turn ids free for other words) and keeps those acked after it (a retry of one
    is still a duplicate), whether or not the segmenter has read those yet."""
    from streams.seqs import Ack, SeqAllocator, Wanted

    alloc = SeqAllocator(redis, ttl_s=3600, lease_s=5.0)

    async def add(
        eids: list[str], offsets: list[int | None], words: str = "w"
    ) -> list[tuple[int, bool]]:
        """Allocated, then acked at `offsets` (None: still in flight)."""
        deadline = asyncio.get_running_loop().time() + 5
        async with alloc.session("ns-f", "s1", deadline) as s:
            async with s.ordered():
                wanted = [Wanted(e, digest=words, turns=((f"{e}#0", words),)) for e in eids]
                got = await s.allocate(wanted)
            acked = [(a, o) for a, o in zip(got, offsets, strict=True) if o is not None]
            await s.confirm([Ack(a.exchange_id, a.seq, 0, o, words) for a, o in acked if o])
        return [(a.seq, a.duplicate) for a in got]

    assert await add(["e0", "e1", "e2", "e3"], [10, 11, 20, None]) == [
        (0, False),
        (1, False),
        (2, False),
        (3, False),
    ]
    svc = make(redis, embedder)
    await svc.forget("ns-f", "s1", {0: 15})  # e0 and e1 before the fence, e2 after, e3 in flight
    assert await add(["e3", "e0", "e2"], [30, 31, 32]) == [(3, False), (4, False), (2, True)]
    assert await add(["e1"], [33], words="other words") == [(5, False)]  # its turn id is free


async def test_segmenter_service_crash_between_commit_and_publish_republishes(
    redis, embedder
) -> None:
    """State and outbox are written together; what was not published yet goes out on the next run."""

    class Crash(Exception):
        pass

    class FailingPublisher(ListPublisher):
        async def publish(self, messages):  # type: ignore[no-untyped-def]
            raise Crash("broker gone")

    svc = make(redis, embedder, FailingPublisher())
    with pytest.raises(Crash):
        await svc.handle(exchanges())
    # the "restarted" worker sees the same input again (offsets were not committed)
    pub = ListPublisher()
    svc2 = make(redis, embedder, pub)
    result = await svc2.handle(exchanges())
    assert result.replays == 5  # the state had already advanced...
    assert turn_ids_of(pub) == [f"s1-t{i}" for i in range(5)]  # ...and nothing is lost
    assert await redis.exists("lychee:seg:{ns1/s1}:outq") == 0
    assert await redis.zcard("lychee:seg:pending") == 0


async def test_segmenter_service_idle_session_is_flushed(redis, embedder) -> None:
    clock = Clock()
    pub = ListPublisher()
    svc = make(redis, embedder, pub, clock)
    await svc.handle(exchanges(texts=TOPICS_A[:2]))
    assert await svc.flush_idle(idle_timeout_s=60) == 0  # not idle yet
    clock.now += 61
    assert await svc.flush_idle(idle_timeout_s=60) == 1
    segs = segments_of(pub)
    assert segs[-1].reason.value == "session_flush"
    assert await svc.flush_idle(idle_timeout_s=60) == 0  # nothing open any more


async def test_segmenter_service_replayed_flush_after_new_exchanges_is_ignored(
    redis, embedder
) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle(exs[:2])
    flush = SessionControl(kind=ControlKind.flush, namespace="ns1", session_id="s1", after_seq=1)
    await svc.handle([flush, *exs[2:4]])
    n = len(segments_of(pub))
    result = await svc.handle([flush])  # redelivered: exchanges 2-3 are open and must stay so
    assert result.segments == 0 and len(segments_of(pub)) == n


async def test_segmenter_service_end_session_keeps_fencing(redis, embedder) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle(
        [*exs, SessionControl(kind=ControlKind.end_session, namespace="ns1", session_id="s1")]
    )
    n = len(pub.messages)
    assert (await svc.handle(exs)).replays == 5
    assert len(pub.messages) == n
    assert await redis.ttl("lychee:seg:{ns1/s1}:state") > 0


async def test_segmenter_service_eager_mode_one_segment_per_exchange(redis, embedder) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub, mode="eager")
    await svc.handle(exchanges())
    segs = segments_of(pub)
    assert [s.reason.value for s in segs] == ["per_exchange"] * 5


async def test_outbox_entries_round_trip(redis) -> None:
    store = SessionStore(redis)
    from workers.segmenter.policy import SessionState

    state = SessionState(namespace="n", session_id="s")
    ok = await store.commit("n/s", "0", state, [OutMessage("a", "n/s", b'{"x": "\\u00e9"}')])
    assert ok
    assert not await store.commit("n/s", "0", state, [])  # stale version refused
    [(_, msg)] = await store.pending("n/s")
    assert msg == OutMessage("a", "n/s", b'{"x": "\\u00e9"}')


async def test_segmenter_service_same_exchange_id_in_two_namespaces_keeps_each_vector(
    redis, embedder
) -> None:
    # loaders number exchanges per session ("s1:0"), so one batch can hold the same id twice
    pub = ListPublisher()
    a = exchanges("ns1", texts=TOPICS_A[:1])[0]
    b = exchanges("ns2", texts=TOPICS_B[:1])[0]
    two = a.model_copy(
        update={
            "exchange_id": "s1:1",
            "seq": 1,
            "turns": [
                Turn(role=Role.user, speaker="Ann", content=TOPICS_A[1], turn_id="u"),
                Turn(role=Role.assistant, content=TOPICS_B[1], turn_id="v"),
            ],
        }
    )
    c = two.model_copy(update={"namespace": "ns2"})
    await make(redis, embedder, pub).handle([a, b, two, c])
    sent = {
        (m["namespace"], m["turn_id"]): m["embedding"]
        for m in (orjson.loads(m.value) for m in pub.messages if m.topic == t.TURNS)
    }
    expected = embedder.embed(
        [a.rendered(), b.rendered(), two.turns[0].rendered(), two.turns[1].rendered()]
    )
    for key, want in zip(
        [("ns1", "s1-t0"), ("ns2", "s1-t0"), ("ns1", "u"), ("ns1", "v")], expected, strict=True
    ):
        assert sent[key] == pytest.approx(want.tolist(), abs=1e-5), key
    assert sent[("ns2", "u")] == pytest.approx(sent[("ns1", "u")], abs=1e-5)


# -- outbox: left behind, drained concurrently ----------------------------------------------


class FailingPublisher(ListPublisher):
    """Refuses every publish, like a broker that went away after the commit."""

    async def publish(self, messages):  # type: ignore[no-untyped-def]
        raise ConnectionError("broker gone")


async def test_segmenter_service_idle_segment_whose_publish_failed_is_published_without_new_input(
    redis, embedder
) -> None:
    clock = Clock()
    pub = ListPublisher()
    await make(redis, embedder, pub, clock, mode="fixed_window").handle(
        exchanges(texts=TOPICS_A[:2])
    )
    assert segments_of(pub) == []
    clock.now += 61
    crashed = make(redis, embedder, FailingPublisher(), clock, mode="fixed_window")
    with pytest.raises(ConnectionError):
        await crashed.flush_idle(idle_timeout_s=60)  # committed, then the publish failed
    assert await redis.zcard("lychee:seg:active") == 0  # no longer open: idle flush won't see it
    later = make(
        redis, embedder, pub, clock, mode="fixed_window"
    )  # the same process's timer, or a restarted one
    assert await later.drain_pending(grace_s=10) == 0  # too fresh: the agent may be draining it
    clock.now += 11
    assert await later.drain_pending(grace_s=10) == 1
    [seg] = segments_of(pub)
    assert seg.reason.value == "session_flush" and seg.turn_ids == ["s1-t0", "s1-t1"]
    assert await redis.zcard("lychee:seg:pending") == 0
    assert await later.drain_pending(grace_s=0) == 0


class GatedPublisher(ListPublisher):
    """Publishes only once released, and says when it was called."""

    def __init__(self) -> None:
        super().__init__()
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def publish(self, messages):  # type: ignore[no-untyped-def]
        self.called.set()
        await self.release.wait()
        await super().publish(messages)


def msg(i: int) -> OutMessage:
    return OutMessage("topic", "n/s", f'{{"i": {i}}}'.encode())


async def commit_entries(store: SessionStore, entries: list[OutMessage]) -> None:
    from workers.segmenter.policy import SessionState

    version, state = await store.load("n/s")
    assert await store.commit(
        "n/s", version, state or SessionState(namespace="n", session_id="s"), entries
    )


async def test_outbox_drainer_never_deletes_an_entry_another_drainer_has_not_published(
    redis, embedder
) -> None:
    store = SessionStore(redis)
    await commit_entries(store, [msg(1), msg(2)])
    slow, fast = GatedPublisher(), ListPublisher()
    a = make(redis, embedder, slow)
    b = make(redis, embedder, fast)
    first = asyncio.create_task(a.drain(["n/s"]))
    await asyncio.wait_for(slow.called.wait(), 10)  # a has read entries 1 and 2
    await b.drain(["n/s"])  # b publishes and deletes 1 and 2
    await commit_entries(store, [msg(3)])  # a new entry behind them
    slow.release.set()
    await asyncio.wait_for(first, 10)  # a deletes what it published: 1 and 2 only
    await b.drain(["n/s"])
    published = [m.value for m in slow.messages + fast.messages]
    assert published.count(msg(3).value) == 1  # 3 survived a's trim and went out
    assert await redis.exists("lychee:seg:{n/s}:outq") == 0


async def test_outbox_two_drainers_racing_a_writer_lose_nothing(redis, embedder) -> None:
    store = SessionStore(redis)
    a_pub, b_pub = ListPublisher(), ListPublisher()
    a, b = make(redis, embedder, a_pub), make(redis, embedder, b_pub)
    done = asyncio.Event()

    async def write() -> None:
        for i in range(200):
            await commit_entries(store, [msg(i)])
            await asyncio.sleep(0)
        done.set()

    async def drain(svc: SegmenterService) -> None:
        while not done.is_set():
            await svc.drain(["n/s"])
            await asyncio.sleep(0)
        await svc.drain(["n/s"])

    await asyncio.wait_for(asyncio.gather(write(), drain(a), drain(b)), 60)
    published = {m.value for m in a_pub.messages + b_pub.messages}
    assert published == {msg(i).value for i in range(200)}
    assert await redis.exists("lychee:seg:{n/s}:outq") == 0
    assert await redis.zcard("lychee:seg:pending") == 0


# -- fencing by position ------------------------------------------------------------------------


def at(*offsets: int) -> list[Position]:
    return [Position(0, o) for o in offsets]


async def test_segmenter_service_redelivered_flush_without_after_seq_closes_nothing(
    redis, embedder
) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub, mode="fixed_window")
    exs = exchanges()
    flush = SessionControl(kind=ControlKind.flush, namespace="ns1", session_id="s1")
    await svc.handle([exs[0], exs[1], flush], at(0, 1, 2))
    closed = segments_of(pub)
    assert [t for s in closed for t in s.turn_ids] == ["s1-t0", "s1-t1"]
    await svc.handle(exs[2:4], at(3, 4))  # opens a new segment
    result = await svc.handle([flush], at(2))  # the flush again, e.g. after a rebalance
    assert result.redeliveries == 1 and result.segments == 0
    assert segments_of(pub) == closed  # exchanges 2-3 stay open
    end = SessionControl(kind=ControlKind.end_session, namespace="ns1", session_id="s1")
    await svc.handle([end], at(5))
    assert [t for s in segments_of(pub) for t in s.turn_ids][2:] == ["s1-t2", "s1-t3"]
    await svc.handle([exs[4]], at(6))  # the session goes on after its end
    result = await svc.handle([end, flush], at(5, 2))  # both redelivered: nothing closes
    assert result.redeliveries == 2 and len(segments_of(pub)) == 2


async def test_segmenter_service_redelivery_after_idle_flush_stays_fenced(redis, embedder) -> None:
    clock = Clock()
    pub = ListPublisher()
    svc = make(redis, embedder, pub, clock, mode="fixed_window")
    exs = exchanges()
    flush = SessionControl(kind=ControlKind.flush, namespace="ns1", session_id="s1")
    await svc.handle([exs[0], flush, exs[1]], at(0, 1, 2))
    clock.now += 61
    assert await svc.flush_idle(idle_timeout_s=60) == 1  # no position of its own
    await svc.handle([exs[2]], at(3))
    before = segments_of(pub)
    result = await svc.handle([exs[0], flush, exs[1]], at(0, 1, 2))
    assert result.redeliveries == 3 and segments_of(pub) == before


async def test_segmenter_service_counts_replayed_exchanges_once_per_message(
    redis, embedder
) -> None:
    store = SessionStore(redis)
    svc = make(redis, embedder)
    exs = exchanges()
    await svc.handle(exs, at(0, 1, 2, 3, 4))
    assert await store.replays(["ns1/s1"]) == {"ns1/s1": 0}
    result = await svc.handle(exs[:3], at(5, 6, 7))  # sent again: new offsets, old seqs
    assert result.replays == 3
    assert await store.replays(["ns1/s1", "ns1/other"]) == {"ns1/s1": 3, "ns1/other": 0}
    await svc.handle(exs[:3], at(5, 6, 7))  # those messages redelivered: not counted again
    assert await store.replays(["ns1/s1"]) == {"ns1/s1": 3}
    assert await store.last_seqs(["ns1/s1", "ns1/other"]) == {"ns1/s1": 4, "ns1/other": -1}


async def test_segmenter_service_forget_between_claim_and_commit_frees_the_claim(
    redis, embedder
) -> None:
    """A forget applied while a message from before it is decided (after the batch's fence
    check, before its turn ids are claimed and its state committed): the message is
    forgotten and its claim with it, so the session's next words under those ids are taken
    (they were refused as a reuse of the forgotten message's ids)."""
    svc = make(redis, embedder)
    first = exchanges()[0]
    (turn_id, _), *_ = first.named_turns()
    load = svc.store.load

    async def forget_then_load(key: str):  # type: ignore[no-untyped-def]
        svc.store.load = load  # type: ignore[method-assign]
        await svc.store.fences.raise_to("ns1", "s1", {0: 10})
        await svc.store.forget("ns1", "s1")
        return await load(key)

    svc.store.load = forget_then_load  # type: ignore[method-assign]
    result = await svc.handle([first], at(3))
    assert [d.action for d in result.decisions] == ["forgotten"]
    assert not await redis.hexists("lychee:seg:{ns1/s1}:turns", turn_id)
    said = first.turns[0].model_copy(update={"content": "Entirely other words, said later."})
    later = await svc.handle([first.model_copy(update={"turns": [said]})], at(11))
    assert [d.action for d in later.decisions] != ["forgotten"] and later.turns == 1


def test_a_turn_that_is_not_memory_is_left_out_of_its_exchanges_text_and_costs_no_model_text() -> (
    None
):
    from tests.workers.builders import HashEmbedder
    from workers.segmenter.vectors import embed_exchanges, placeholder

    said = Turn(role=Role.user, content="I bought a red kayak.")
    reply = Turn(role=Role.assistant, content="A fine boat.")
    tool = Turn(role=Role.assistant, content='{"type": "function_call"}', memory=False)

    def exchange(seq: int, *turns: Turn) -> Exchange:
        return Exchange(
            namespace="a", session_id="s1", seq=seq, exchange_id=f"s1:{seq}", turns=list(turns)
        )

    embedder = HashEmbedder()
    batch = [exchange(0, said, tool), exchange(1, tool), exchange(2, tool, tool)]
    batch.append(exchange(3, said, tool, reply))
    mixed, alone, two, both = embed_exchanges(embedder, batch)
    joined = f"{said.rendered()}\n{reply.rendered()}"
    assert embedder.calls == [[said.rendered(), joined, said.rendered(), reply.rendered()]]
    vector = embedder.embed([said.rendered()])[0].tolist()
    aside = placeholder(batch[0], embedder.dim).tolist()  # the tool item's: never the model's
    assert [mixed[0].tolist(), *(v.tolist() for v in mixed[1])] == [vector, vector, aside]
    assert both[0].tolist() == embedder.embed([joined])[0].tolist()
    assert [v.tolist() for v in both[1]] == [
        vector,
        placeholder(batch[3], embedder.dim).tolist(),
        embedder.embed([reply.rendered()])[0].tolist(),
    ]
    # tool output alone: a placeholder of its own, shared by its turns
    mine = placeholder(batch[1], embedder.dim)
    assert float(np.linalg.norm(mine)) == pytest.approx(1.0)
    assert [alone[0].tolist(), *(v.tolist() for v in alone[1])] == [mine.tolist()] * 2
    assert two[0].tolist() == placeholder(batch[2], embedder.dim).tolist() != mine.tolist()
    assert [v.tolist() for v in two[1]] == [two[0].tolist()] * 2


async def test_segmenter_service_keeps_tool_items_as_turns_and_out_of_segments(redis) -> None:
    """An agent run's tool items (`memory=False`): published as raw turns, fenced and replayed
    like any exchange, never in a segment."""
    from tests.workers.builders import HashEmbedder

    def said(i: int) -> Turn:
        return Turn(
            role=Role.user, speaker="Ann", content=f"I like kayak number {i}.", turn_id=f"u{i}"
        )

    def tool(i: int) -> Turn:
        return Turn(
            role=Role.assistant, content=f'{{"output": {i}}}', turn_id=f"t{i}", memory=False
        )

    def exchange(seq: int, *turns: Turn) -> Exchange:
        return Exchange(
            namespace="ns", session_id="s", seq=seq, exchange_id=f"x{seq}", turns=list(turns)
        )

    pub = ListPublisher()
    svc = make(redis, HashEmbedder(), pub)
    batch = [exchange(0, said(0)), exchange(1, tool(1)), exchange(2, said(2), tool(3), said(4))]
    at = [Position(0, 10), Position(0, 11), Position(0, 12)]
    first = await svc.handle(batch, at)
    assert [d.action for d in first.decisions] == ["start", "aside", "append"]
    assert turn_ids_of(pub) == ["u0", "t1", "u2", "t3", "u4"]
    again = await svc.handle(batch, at)
    assert [d.action for d in again.decisions] == ["redelivery"] * 3
    resent = await svc.handle([exchange(1, tool(1))], [Position(0, 13)])
    assert [d.action for d in resent.decisions] == ["replay"]
    await svc.handle([SessionControl(kind=ControlKind.flush, namespace="ns", session_id="s")])
    [segment] = segments_of(pub)
    assert [x.turn_ids for x in segment.exchanges] == [["u0"], ["u2", "u4"]]


def test_a_turn_an_endpoint_gave_an_all_zero_vector_is_kept_with_the_placeholder() -> None:
    """The contract refuses a vector without a direction; the turn is still written (found
    by its words), not its exchange dead-lettered."""
    from workers.segmenter.vectors import placeholder, raw_turns

    ex = Exchange(
        namespace="a",
        session_id="s1",
        seq=0,
        exchange_id="s1:0",
        turns=[Turn(role=Role.user, content="I bought a red kayak.")],
    )
    (turn,) = raw_turns(ex, [np.zeros(8, dtype=np.float32)], "m")
    assert turn.embedding == placeholder(ex, 8).tolist()
