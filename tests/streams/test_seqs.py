"""The per-session seq allocator and the progress watermarks, against real Redis."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from schemas import RawTurn, Role, Turn, session_key
from schemas.exchange import named_turns
from streams.errors import SeqRejected, SessionBusy
from streams.progress import Progress
from streams.seqs import Ack, SeqAllocator, Wanted, segmenter_state_key
from workers.forget import seq_floor_key
from workers.segmenter.policy import SessionState
from workers.segmenter.state_store import SessionStore


def allocator(redis, lease_s: float = 5.0) -> SeqAllocator:  # type: ignore[no-untyped-def]
    return SeqAllocator(redis, ttl_s=3600, lease_s=lease_s)


def deadline(seconds: float = 5.0) -> float:
    return asyncio.get_running_loop().time() + seconds


async def allocate(alloc: SeqAllocator, wanted: list[Wanted], sid: str = "s1"):  # type: ignore[no-untyped-def]
    async with alloc.session("ns", sid, deadline()) as s, s.ordered():
        return await s.allocate(wanted)


async def test_seqs_state_key_is_the_segmenters(redis) -> None:  # type: ignore[no-untyped-def]
    key = session_key("ns", "s1")
    assert segmenter_state_key(key) == SessionStore(redis)._state_key(key)


async def test_seqs_new_session_numbers_from_zero_in_request_order(redis) -> None:  # type: ignore[no-untyped-def]
    got = await allocate(allocator(redis), [Wanted("a"), Wanted("b"), Wanted("c")])
    assert [(a.exchange_id, a.seq, a.duplicate) for a in got] == [
        ("a", 0, False),
        ("b", 1, False),
        ("c", 2, False),
    ]


async def test_seqs_continue_after_the_segmenters_applied_last_seq(redis) -> None:  # type: ignore[no-untyped-def]
    store = SessionStore(redis)
    state = SessionState(namespace="ns", session_id="s1", last_seq=41)
    assert await store.commit(session_key("ns", "s1"), "0", state, [])
    got = await allocate(allocator(redis), [Wanted("x"), Wanted("y")])
    assert [a.seq for a in got] == [42, 43]


async def test_seqs_after_a_forget_a_caller_numbers_from_zero_and_the_gateway_above_it(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    """A forget leaves the highest seq the gateway gave (4): its own numbers go on above it,
    while a caller that numbers its exchanges starts again from 0 and goes on (before, the
    floor became the highest seq given, and the caller's seq 1 was refused after its 0)."""
    await redis.set(seq_floor_key(session_key("ns", "s1")), 4)
    alloc = allocator(redis)
    mine = await allocate(alloc, [Wanted("y0", 0)])
    assert [a.seq for a in mine] == [0]
    more = await allocate(alloc, [Wanted("y1", 1), Wanted("y2", 2)])
    assert [a.seq for a in more] == [1, 2]
    assert [a.seq for a in await allocate(alloc, [Wanted("gw")], sid="s1")] == [5]


async def test_seqs_acked_id_is_a_duplicate_with_its_first_receipt(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    async with alloc.session("ns", "s1", deadline()) as s:
        async with s.ordered():
            (a,) = await s.allocate([Wanted("e1", None, "d1")])
        assert await s.confirm([Ack("e1", a.seq, 3, 117, "d1")]) == 0
    (again, new) = await allocate(alloc, [Wanted("e1", None, "d1"), Wanted("e2", None, "d2")])
    assert (again.seq, again.duplicate, again.partition, again.offset) == (0, True, 3, 117)
    assert (new.seq, new.duplicate) == (1, False)


async def test_seqs_acked_id_with_other_words_is_rejected(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    async with alloc.session("ns", "s1", deadline()) as s:
        async with s.ordered():
            (a,) = await s.allocate([Wanted("e1", None, "d1")])
        await s.confirm([Ack("e1", a.seq, 0, 5, "d1")])
    with pytest.raises(SeqRejected) as err:
        await allocate(alloc, [Wanted("e1", None, "other")])
    assert err.value.reason == "changed" and err.value.index == 0
    with pytest.raises(SeqRejected, match="accepted with seq 0"):
        await allocate(alloc, [Wanted("e1", 7, "d1")])


def turn(tid: str, text: str) -> Turn:
    return Turn(role=Role.user, content=text, turn_id=tid)


async def test_seqs_a_turn_id_names_the_same_words_throughout_the_session(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    first = named_turns("e1", [turn("msg", "my passport is X1"), turn("reply", "noted")])
    await allocate(alloc, [Wanted("e1", None, "d1", first)])
    # the same words under a new exchange id: a retry, accepted
    again = named_turns("e2", [turn("msg", "my passport is X1")])
    assert [a.seq for a in await allocate(alloc, [Wanted("e2", None, "d2", again)])] == [1]
    # other words under a used id: refused, naming the turn, nothing written
    reused = named_turns("e3", [turn("new", "hello"), turn("msg", "my flight is at 9")])
    with pytest.raises(SeqRejected) as err:
        await allocate(alloc, [Wanted("e3", None, "d3", reused)])
    assert (err.value.index, err.value.turn, err.value.field) == (0, 1, "turns.1.turn_id")
    assert "other words" in str(err.value)
    assert [a.seq for a in await allocate(alloc, [Wanted("e4", None, "d4")])] == [2]
    # two exchanges of one request that give one id other words: the second refused
    clash = [Wanted("e5", None, "d5", named_turns("e5", [turn("t9", "a")]))]
    clash.append(Wanted("e6", None, "d6", named_turns("e6", [turn("t9", "b")])))
    with pytest.raises(SeqRejected) as err:
        await allocate(alloc, clash)
    assert (err.value.index, err.value.turn) == (1, 0)
    # another session may use the same ids
    assert [a.seq for a in await allocate(alloc, [Wanted("e7", None, "d7", reused)], "s2")] == [0]


async def test_seqs_a_callers_turn_id_may_not_name_a_turn_an_exchange_id_made(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    plain = Turn(role=Role.user, content="my passport is X1")
    assert named_turns("e7", [plain]) == (("e7#0", plain.digest()),)
    await allocate(alloc, [Wanted("e7", None, "d7", named_turns("e7", [plain]))])
    impostor = named_turns("e8", [turn("e7#0", "my passport is Z9")])
    with pytest.raises(SeqRejected) as err:
        await allocate(alloc, [Wanted("e8", None, "d8", impostor)])
    assert (err.value.reason, err.value.field) == ("turn", "turns.0.turn_id")
    # and the other way round: a caller's id first, then the exchange whose turn it names
    await allocate(alloc, [Wanted("e9", None, "d9", named_turns("e9", [turn("x#0", "hi")]))])
    with pytest.raises(SeqRejected):
        await allocate(alloc, [Wanted("x", None, "dx", named_turns("x", [plain]))])


async def test_seqs_callers_seq_must_pass_everything_acked_or_applied(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    async with alloc.session("ns", "s1", deadline()) as s:
        async with s.ordered():
            got = await s.allocate([Wanted("a", 5), Wanted("b", 9)])
        await s.confirm([Ack(x.exchange_id, x.seq, 0, i) for i, x in enumerate(got)])
    with pytest.raises(SeqRejected) as stale:
        await allocate(alloc, [Wanted("c", 9)])
    assert (stale.value.reason, stale.value.seq) == ("stale", 9)
    with pytest.raises(SeqRejected) as order:
        await allocate(alloc, [Wanted("c", 12), Wanted("d", 11)])
    assert (order.value.reason, order.value.index) == ("order", 1)
    # a rejected request wrote nothing: the next auto seq follows 9, not 12
    (c,) = await allocate(alloc, [Wanted("c")])
    assert c.seq == 10


async def test_seqs_callers_seq_must_pass_every_seq_given_even_unacked(redis) -> None:  # type: ignore[no-untyped-def]
    """Seq 5 given and still on its way: a 4 sent now would reach the partition behind it
    and be dropped as a replay, after its 202. Refused instead; a retry of 5 itself is not."""
    alloc = allocator(redis)
    (five,) = await allocate(alloc, [Wanted("e5", 5)])
    with pytest.raises(SeqRejected) as given:
        await allocate(alloc, [Wanted("e4", 4)])
    assert (given.value.reason, given.value.seq, given.value.field) == ("given", 5, "seq")
    assert "in order" in str(given.value)
    with pytest.raises(SeqRejected):
        await allocate(alloc, [Wanted("other", 5)])
    (again,) = await allocate(alloc, [Wanted("e5", 5)])
    assert (again.seq, again.duplicate) == (5, False)  # unacked: sent again
    assert [a.seq for a in await allocate(alloc, [Wanted("e6", 6)])] == [6]


async def test_seqs_unacked_id_sent_again_keeps_its_seq(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    (first,) = await allocate(alloc, [Wanted("e1")])
    (again,) = await allocate(alloc, [Wanted("e1")])
    assert again.seq == first.seq and not again.duplicate


async def test_seqs_concurrent_callers_get_distinct_seqs_in_enqueue_order(redis) -> None:  # type: ignore[no-untyped-def]
    alloc = allocator(redis)
    enqueued: list[int] = []

    async def one(i: int) -> None:
        async with alloc.session("ns", "s1", deadline(30)) as s:
            async with s.ordered():
                (a,) = await s.allocate([Wanted(f"e{i}")])
                enqueued.append(a.seq)  # what the gateway's send does under the lock
            await asyncio.sleep(0.001 * (i % 7))  # acks come back in any order
            await s.confirm([Ack(a.exchange_id, a.seq, 0, a.seq)])

    await asyncio.gather(*(one(i) for i in range(300)))
    assert enqueued == list(range(300))


async def test_seqs_second_process_waits_for_the_lease_then_continues(redis) -> None:  # type: ignore[no-untyped-def]
    a, b = allocator(redis), allocator(redis)  # two gateway processes
    async with a.session("ns", "s1", deadline()) as s:
        async with s.ordered():
            (x,) = await s.allocate([Wanted("x")])
        with pytest.raises(SessionBusy):
            async with b.session("ns", "s1", deadline(0.3)) as other, other.ordered():
                pytest.fail("entered a session another process holds")
        await s.confirm([Ack("x", x.seq, 0, 0)])
    (y,) = await allocate(b, [Wanted("y")])
    assert (x.seq, y.seq) == (0, 1)


async def test_seqs_expired_lease_of_a_dead_process_is_taken_over(redis) -> None:  # type: ignore[no-untyped-def]
    dead = allocator(redis, lease_s=0.2)
    s = dead.session("ns", "s1", deadline())
    handle = await s.__aenter__()  # never left: the process died holding the lease
    async with handle.ordered():
        await handle.allocate([Wanted("x")])
    (y,) = await allocate(allocator(redis), [Wanted("y")])
    assert y.seq == 1


def raw_turn(
    session: str, seq: int, index: int = 0, exchange_turns: int | None = None, ns: str = "ns"
) -> RawTurn:
    return RawTurn(
        namespace=ns,
        session_id=session,
        turn_id=f"{session}{seq}-{index}",
        exchange_id=f"{session}{seq}",
        seq=seq,
        index=index,
        exchange_turns=exchange_turns,
        role=Role.user,
        text="t",
        embedding=[1.0],
        embedding_model="m",
    )


async def test_progress_watermarks_only_rise_and_say_what_is_searchable(redis) -> None:  # type: ignore[no-untyped-def]
    progress = Progress(redis)
    await progress.raise_accepted("ns", {"s1": 4, "s2": 1})
    await progress.record_indexed([raw_turn("s1", 2), raw_turn("s1", 4), raw_turn("s2", 0)])
    await progress.record_indexed([raw_turn("s1", 3)])  # a redelivery does not lower it
    assert await progress.indexed("ns", ["s1", "s2", "s3"]) == {"s1": 4, "s2": 0}
    found = {p.session_id: p for p in await progress.namespace("ns")}
    assert found["s1"].searchable and not found["s2"].searchable
    assert (found["s2"].accepted, found["s2"].indexed) == (1, 0)
    assert [p.session_id for p in await progress.namespace("ns", "s2")] == ["s2"]
    assert await progress.namespace("other") == []


async def test_progress_marks_an_exchange_indexed_only_once_all_its_turns_are(redis) -> None:  # type: ignore[no-untyped-def]
    progress = Progress(redis)

    def turn(seq: int, index: int) -> RawTurn:
        return raw_turn("s", seq, index, exchange_turns=2)

    await progress.record_indexed([turn(0, 0), turn(0, 1), turn(1, 0)])  # seq 1 cut by the batch
    assert await progress.indexed("ns", ["s"]) == {"s": 0}
    await progress.record_indexed([turn(1, 1)])
    assert await progress.indexed("ns", ["s"]) == {"s": 1}
    await progress.record_indexed([turn(2, 0)])
    assert await progress.indexed("ns", ["s"]) == {"s": 1}


async def test_progress_overview_lists_namespaces_and_when_they_were_last_written(redis) -> None:  # type: ignore[no-untyped-def]
    progress = Progress(redis)
    turn = raw_turn("s1", 3, ns="ns-b")
    await progress.raise_accepted("ns-a", {"s1": 2})
    await progress.raise_accepted("ns-b", {"s1": 3})
    before = datetime.now(UTC) - timedelta(seconds=1)
    await progress.record_indexed([turn])
    assert await progress.namespaces() == {"ns-a", "ns-b"}
    assert await progress.overview("ns-a") == (False, None)
    searchable, written = await progress.overview("ns-b")
    assert searchable and written is not None and written >= before
    await progress.forget("ns-b", None, {0: 0})
    assert await progress.namespaces() == {"ns-a"}
    assert await progress.overview("ns-b") == (True, None)


async def test_seqs_hot_session_on_two_processes_is_served_by_both_in_seq_order(redis) -> None:  # type: ignore[no-untyped-def]
    a, b = allocator(redis), allocator(redis)
    order: list[tuple[str, int]] = []

    async def one(alloc: SeqAllocator, name: str, i: int) -> None:
        async with alloc.session("ns", "hot", deadline(60)) as s:
            async with s.ordered():
                (x,) = await s.allocate([Wanted(f"{name}{i}")])
                order.append((name, x.seq))  # the broker sees sends in this order
            await asyncio.sleep(0.005)
            await s.confirm([Ack(x.exchange_id, x.seq, 0, x.seq)])

    async def caller(alloc: SeqAllocator, name: str, i: int) -> None:
        await asyncio.sleep(0.01 * i)  # a steady stream of callers on both, for about 1.5 s
        await one(alloc, name, i)

    await asyncio.gather(
        *(caller(a, "a", i) for i in range(150)), *(caller(b, "b", i) for i in range(150))
    )
    assert [seq for _, seq in order] == list(range(300))
    turns = sum(1 for x, y in zip(order, order[1:], strict=False) if x[0] != y[0])
    assert turns >= 2, "one process kept the session to itself"


async def test_progress_forget_keeps_the_watermarks_of_what_was_acked_after_the_fence(
    redis,
) -> None:  # type: ignore[no-untyped-def]
    """A session written after the forget (acked at or past the fence's offset) may be indexed
    before the indexer reads the forget: its receipts wait on these watermarks."""
    alloc, progress = allocator(redis), Progress(redis)
    for sid, offset in (("old", 3), ("new", 12)):
        async with alloc.session("ns", sid, deadline()) as s:
            async with s.ordered():
                (a,) = await s.allocate([Wanted(f"{sid}-0", None, "d")])
            await s.confirm([Ack(a.exchange_id, a.seq, 0, offset, "d")])
    await progress.record_indexed([raw_turn("old", 0), raw_turn("new", 0)])
    await progress.forget("ns", None, {0: 10})
    assert await progress.accepted("ns", ["old", "new"]) == {"new": 0}
    assert await progress.indexed("ns", ["old", "new"]) == {"new": 0}
    await progress.forget("ns", "new", {0: 20})  # a later forget of that session: gone too
    assert await progress.namespaces() == set()
    # an exchange still in flight may be from after the fence: its session's are kept
    async with alloc.session("ns", "flying", deadline()) as s, s.ordered():
        await s.allocate([Wanted("flying-0", None, "d")])
    await progress.raise_accepted("ns", {"flying": 0})
    await progress.forget("ns", None, {0: 99})
    assert await progress.accepted("ns", ["flying"]) == {"flying": 0}
