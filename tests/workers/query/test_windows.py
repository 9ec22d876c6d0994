"""Raw-turn hits expanded into windows of neighbouring turns: the arithmetic and the flow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from schemas.plan import Plan, QuestionType, Route
from schemas.records import MemoryType
from tests.workers.builders import (
    HASH_DIM,
    HashEmbedder,
    index_batches,
    make_batch,
    make_segment,
    turn,
)
from tests.workers.query.test_service import request
from workers.encoder.encoded import build_record
from workers.query.multiroute import MultiRouteRecall, RecallConfig
from workers.query.presets import SERVED
from workers.query.service import QueryDeps, QueryService
from workers.query.windows import spans, windows
from workers.store import EvidenceStore


def row(tid: str, seq: int, idx: int = 0, session: str = "s1") -> dict[str, Any]:
    return {
        "id": f"a/{session}/{tid}",
        "namespace": "a",
        "session_id": session,
        "turn_id": tid,
        "seq": seq,
        "idx": idx,
        "text": f"line {tid}",
        "session_date": None,
    }


def test_spans_cover_each_hit_and_merge_overlaps_per_session() -> None:
    hits = [row("t5", 5), row("t7", 7), row("t20", 20), row("t5", 5, session="s2")]
    assert spans(hits, 1) == [("s1", 4, 8), ("s1", 19, 21), ("s2", 4, 6)]
    assert spans(hits, 0) == [("s1", 5, 5), ("s1", 7, 7), ("s1", 20, 20), ("s2", 5, 5)]


def test_window_is_radius_turns_either_side_in_conversation_order() -> None:
    # exchange 2 holds two turns (a message and its reply): turns count, not exchanges
    near = [row("t4", 3), row("t3", 2, 1), row("t2", 2, 0), row("t1", 1), row("t5", 4)]
    out = windows([row("t3", 2, 1)], near, 1)
    w = out["a/s1/t3"]
    assert w["turn_ids"] == ["t2", "t3", "t4"]
    assert w["id"] == "a/s1/t2..t4"
    assert w["text"] == "line t2\nline t3\nline t4"
    # at the session's start the window is cut, never borrowed from elsewhere
    assert windows([row("t1", 1)], near, 1)["a/s1/t1"]["turn_ids"] == ["t1", "t2"]
    assert windows([row("t1", 1)], near, 2)["a/s1/t1"]["turn_ids"] == ["t1", "t2", "t3"]


def test_in_a_chat_a_window_is_the_hits_exchange_a_message_and_its_reply() -> None:
    roles = ["assistant", "user", "assistant", "assistant", "user", "assistant"]
    near = [{**row(f"t{i}", i), "role": r} for i, r in enumerate(roles)]

    def ids(hit: int, radius: int) -> list[str]:
        return list(windows([near[hit]], near, radius)[near[hit]["id"]]["turn_ids"])

    assert ids(1, 1) == ["t1", "t2"]  # not the reply before the message
    assert ids(2, 1) == ["t1", "t2", "t3"]  # the message it answers, the rest of the reply
    assert ids(3, 2) == ["t1", "t2", "t3"]  # never the next message
    assert ids(5, 2) == ["t4", "t5"]
    assert windows([near[0]], near, 1) == {}  # an opening reply answers no message
    humans = [{**r, "role": "user"} for r in near]  # two people: either side, as before
    assert windows([humans[1]], humans, 1)["a/s1/t1"]["turn_ids"] == ["t0", "t1", "t2"]


def test_a_hit_without_neighbours_stays_a_turn() -> None:
    assert windows([row("t9", 9)], [row("t9", 9)], 1) == {}
    assert windows([row("t9", 9)], [], 1) == {}


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    lines = [
        ("a", "s1", "t1", "Ann", "I finally finished the pottery class"),
        ("a", "s1", "t2", "Bo", "What did you make there?"),
        ("a", "s1", "t3", "Ann", "A blue vase for my grandmother"),
        ("a", "s1", "t4", "Bo", "She must have loved it"),
        ("a", "s1", "t5", "Ann", "Next week I start a glazing workshop"),
        ("a", "s2", "t3", "Ann", "A blue vase for my grandmother"),
        ("b", "s1", "t2", "Cy", "a blue vase in another tenant"),
    ]
    rows = [
        turn(ns, tid, text, 0, session=session).model_copy(update={"speaker": speaker})
        for ns, session, tid, speaker, text in lines
    ]
    vecs = HashEmbedder().embed([r.rendered() for r in rows])
    s.turns.upsert(
        [
            r.model_copy(
                update={"embedding": v.tolist(), "embedding_model": HashEmbedder.model_name}
            )
            for r, v in zip(rows, vecs, strict=True)
        ]
    )
    return s


def test_turns_near_reads_only_the_asked_spans_of_the_namespace(store: EvidenceStore) -> None:
    got = store.turns.near("a", [("s1", 2, 3), ("s2", 1, 9)])
    assert sorted((r["session_id"], r["turn_id"]) for r in got) == [
        ("s1", "t2"),
        ("s1", "t3"),
        ("s2", "t3"),
    ]
    assert store.turns.near("a", []) == []
    assert store.turns.near("a", [("s1' OR '1'='1", 0, 99)]) == []


def plan(question: str) -> Plan:
    return Plan(
        question_type=QuestionType.single,
        semantic_queries=[question],
        routes=[Route(goal=question, queries=[question])],
        source="heuristic",
    )


@pytest.mark.asyncio
async def test_recall_returns_windows_with_every_turn_as_provenance(store: EvidenceStore) -> None:
    q = "blue vase grandmother"
    recall = MultiRouteRecall(store, HashEmbedder())
    (route,) = await recall.recall(plan(q), q, "a", 5)
    by_id = {c.item_id: c for c in route.candidates}
    vase = by_id["a/s1/t2..t4"]
    assert vase.kind == "window" and vase.turn_ids == ("t2", "t3", "t4")
    assert vase.text.splitlines()[1] == "Ann: A blue vase for my grandmother"
    # the other session's copy has no neighbours there: it stays a single turn
    assert by_id["a/s2/t3"].kind == "turn"
    assert all(i.startswith("a/") for i in by_id)

    off = MultiRouteRecall(store, HashEmbedder(), RecallConfig(turn_window=0))
    (route,) = await off.recall(plan(q), q, "a", 5)
    assert {c.kind for c in route.candidates} == {"turn"}


@pytest.mark.asyncio
async def test_a_window_is_one_raw_memory_in_the_context(store: EvidenceStore) -> None:
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(
        request("a", "blue vase", k=3)
    )
    window = next(e for e in reply.evidence if e.kind == "window")
    assert window.turn_ids == ["t2", "t3", "t4"] and window.date is not None
    raw = reply.context.split("Raw Memories:\n", 1)[1]
    assert (
        "- [Mentioned: 2 March 2024] Bo: What did you make there?\n"
        "  Ann: A blue vase for my grandmother\n"
        "  Bo: She must have loved it"
    ) in raw


@pytest.mark.asyncio
async def test_a_record_gains_a_share_of_what_the_raw_turns_of_its_turn_scored(
    store: EvidenceStore,
) -> None:
    said, other = (
        build_record(make_segment("a", session, 0, (tid,)), MemoryType.fact, text, [tid])
        for session, tid, text in (
            ("s2", "t3", "Ann gave a gift"),
            ("s1", "t9", "Ann gave a present"),
        )
    )
    for r in (said, other):
        index_batches(
            store,
            [make_batch(make_segment("a", r.source_session, 0, r.evidence), [r])],
            HashEmbedder(),
        )
    q = "blue vase grandmother gift present"
    scores = []
    recall = MultiRouteRecall(store, HashEmbedder())
    for p in (replace(SERVED, turn_credit=0.0, turn_credit_head=0.0), SERVED):
        (route,) = await recall.recall(plan(q), q, "a", 20, preset=p)
        scores.append({x.item_id: x.channel_scores["route_rrf"] for x in route.candidates})
    off, on = scores
    gift, present = (f"a/record/{r.record_id}" for r in (said, other))
    # credited by its own session's turn t3, not by session s1's window of a t3, found higher
    assert off["a/s1/t2..t4"] > off["a/s2/t3"]
    assert on[gift] == pytest.approx(off[gift] + SERVED.turn_credit * off["a/s2/t3"])
    assert on[present] == off[present]  # no raw turn of t9 was found
    assert {i: v for i, v in on.items() if "/record/" not in i} == {
        i: v for i, v in off.items() if "/record/" not in i
    }  # windows and turns keep their own scores


def test_window_stops_at_its_token_bound_nearest_turns_first() -> None:
    near = [row("t1", 1), row("t2", 2), row("t3", 3)]
    near[0]["text"] = "long " * 400  # the turn before is a whole reply: it does not fit
    out = windows([row("t2", 2)], near, 1, max_tokens=50)
    assert out["a/s1/t2"]["turn_ids"] == ["t2", "t3"]
    # nothing fits beside the hit: it stays a turn
    assert windows([row("t2", 2)], near, 1, max_tokens=3) == {}
