"""The segmenter stage against real Redis and the real MiniLM model, no broker."""

from __future__ import annotations

from datetime import datetime

import orjson
import pytest

from schemas import ControlKind, Exchange, Role, Segment, SessionControl, Turn
from schemas import topics as t
from workers.ports import ListPublisher, OutMessage
from workers.segmenter.params import SegmenterParams
from workers.segmenter.policy import SegmentPolicy
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


async def test_segmenter_service_out_of_order_exchange_is_ignored(redis, embedder) -> None:
    pub = ListPublisher()
    svc = make(redis, embedder, pub)
    exs = exchanges()
    await svc.handle([exs[0], exs[2]])
    result = await svc.handle([exs[1]])  # seq 1 after seq 2: already behind the session
    assert result.replays == 1
    assert "s1-t1" not in turn_ids_of(pub)


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
    assert await redis.llen("lychee:seg:{ns1/s1}:outbox") == 0


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
    assert await store.pending("n/s") == [OutMessage("a", "n/s", b'{"x": "\\u00e9"}')]


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
