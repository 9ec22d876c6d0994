"""Today's truth first, through the real indexer (its rules write the links) and the query
service on a real LanceDB: the newer value above the older, the past left alone, conflicts
side by side, and the marks in fields and in words."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from schemas import EvidenceItem, QueryReply, QueryRequest, Role, SegmentExchange, Turn
from schemas.records import MemoryType
from tests.workers.builders import (
    HASH_DIM,
    HashEmbedder,
    make_batch,
    said_in_turns,
    segment_of,
    statement,
)
from workers.encoder.encoded import build_record
from workers.indexer.service import IndexBatch, IndexerService
from workers.query.currency import (
    HEAD,
    _subject,
    about_the_past,
    current_first,
    current_within,
    later_first,
)
from workers.query.denials import account_beside_denial
from workers.query.serialize import currency_notes, item_line, within_budget
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

pytestmark = pytest.mark.asyncio

SAID = [  # (session, date, turn id, text): two values of one attribute, a denial, an account
    ("s1", datetime(2024, 3, 1), "s1t1", "The greenhouse heater draws 900 watts on cold nights."),
    ("s1", datetime(2024, 3, 1), "s1t2", "I wrote the serial driver for the compass module."),
    ("s2", datetime(2024, 4, 2), "s2t1", "The greenhouse heater now draws 650 watts at night."),
    (
        "s2",
        datetime(2024, 4, 2),
        "s2t2",
        "I've never written a serial driver for a compass module.",
    ),
]


async def indexed(tmp_path: Path) -> EvidenceStore:
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    batches = [
        statement("a", session, n, day, text, tid)
        for n, (session, day, tid, text) in enumerate(SAID)
    ]
    written = await IndexerService(store, HashEmbedder()).write(IndexBatch(records=batches))
    assert written["links_written"] == 2
    return store


def request(q: str) -> QueryRequest:
    return QueryRequest(
        correlation_id="c1",
        namespace="a",
        query=q,
        k=4,
        reply_partition=0,
        deadline_ms=int(datetime(2100, 1, 1).timestamp() * 1000),
    )


def rid(item: EvidenceItem) -> str:
    """The record id of a record item (`namespace/record/<id>`): what links name."""
    return item.item_id.rsplit("/", 1)[-1]


def texts(evidence: list[EvidenceItem]) -> list[str]:
    return [e.text for e in evidence]


def first_saying(evidence: list[EvidenceItem], statement: str) -> int:
    """Where the first item saying `statement` is: its record, or its raw turn, which takes a
    record's place among a reply's first items (`workers.query.shown`)."""
    return next(i for i, e in enumerate(evidence) if statement in e.text)


def record_ids(store: EvidenceStore) -> dict[str, str]:
    """Each user statement's record id (what links and marks name), by its text."""
    return {r["semantic_text"]: r["id"] for r in store.records.of_kind("a", "fact", "user")}


async def test_a_question_about_the_present_gets_the_newer_value_first(tmp_path: Path) -> None:
    svc = QueryService(QueryDeps(await indexed(tmp_path), HashEmbedder()))
    reply = await svc.search(request("How many watts does the greenhouse heater draw?"))
    found = texts(reply.evidence)
    new, old = SAID[2][3], SAID[0][3]
    assert found.index(new) < found.index(old)
    older = reply.evidence[found.index(old)]
    newer = reply.evidence[found.index(new)]
    assert older.superseded_by == [rid(newer)] and older.valid_to == "2024-04-02"
    assert newer.supersedes == [rid(older)] and newer.valid_from == "2024-04-02"
    assert "[replaced on 2 April 2024 by a later statement]" in reply.context
    assert "[current since 2 April 2024; replaces an earlier statement]" in item_line(newer)


async def test_a_question_about_the_past_keeps_the_order_and_the_marks(tmp_path: Path) -> None:
    store = await indexed(tmp_path)
    plain = QueryService(QueryDeps(store, HashEmbedder()))
    q = "How many watts did the greenhouse heater draw before?"
    assert about_the_past(q) and not about_the_past("How many watts does it draw?")
    reply = await plain.search(request(q))
    old = next(e for e in reply.evidence if e.text == SAID[0][3])
    assert old.superseded_by  # still marked, where likeness put it


async def test_conflicting_statements_come_side_by_side(tmp_path: Path) -> None:
    svc = QueryService(QueryDeps(await indexed(tmp_path), HashEmbedder()))
    reply = await svc.search(request("Have I written a serial driver for the compass module?"))
    found = texts(reply.evidence)
    at = sorted(found.index(SAID[i][3]) for i in (1, 3))
    assert at[1] == at[0] + 1
    both = [reply.evidence[i] for i in at]
    assert both[0].conflict == [rid(both[1])] and both[1].conflict == [rid(both[0])]
    assert reply.context.count("contradicted by another statement") == 2


async def test_a_namespace_without_links_replies_as_before(tmp_path: Path) -> None:
    store = await indexed(tmp_path)
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(
        request("How many watts does the greenhouse heater draw?").model_copy(
            update={"namespace": "b"}
        )
    )
    assert reply.evidence == [] and reply.schema_version == QueryReply.latest_version


def filler(n: int) -> EvidenceItem:
    return EvidenceItem(
        kind="turn", item_id=f"a/s9/x{n}", text=f"x{n}", turn_ids=[f"x{n}"], session_id="s9"
    )


def said_as_turn(i: int) -> EvidenceItem:
    """The raw turn of SAID[i]: it follows the links of the record that cites it."""
    session, _, tid, text = SAID[i]
    return EvidenceItem(
        kind="turn", item_id=f"a/{session}/{tid}", text=text, turn_ids=[tid], session_id=session
    )


async def test_current_first_moves_the_newer_turn_up_and_adds_a_missing_record(
    tmp_path: Path,
) -> None:
    store = await indexed(tmp_path)
    q = "How many watts does the greenhouse heater draw?"
    items = [filler(0), said_as_turn(0), filler(1), said_as_turn(2)]
    moved = current_first(store, "a", q, items)
    assert moved is not None
    assert [i.item_id for i in moved[0]] == ["a/s9/x0", "a/s2/s2t1", "a/s1/s1t1", "a/s9/x1"]
    # the newer one not retrieved at all: its record comes from the store, above the older
    added = current_first(store, "a", q, [filler(0), said_as_turn(0), filler(1)])
    assert added is not None
    evidence, context, _ = added
    assert [i.kind for i in evidence] == ["turn", "record", "turn"]
    assert evidence[1].text == SAID[2][3] and evidence[1].supersedes
    assert len(evidence) == 3  # as many items as asked for: the last one made room
    # the past: nothing moves
    past = current_first(store, "a", "How many watts did the heater draw before?", items)
    assert past is not None and [i.item_id for i in past[0]] == [i.item_id for i in items]


async def test_a_passage_of_a_turn_is_marked_only_by_the_records_it_shows(
    tmp_path: Path,
) -> None:
    """A long turn shown as a passage (`span`) is marked by what replaced a record of its turn
    only when the passage says that record: another part of the reply is not replaced."""
    store = await indexed(tmp_path)
    q = "How many watts does the greenhouse heater draw?"

    def passage(text: str) -> EvidenceItem:
        return said_as_turn(0).model_copy(
            update={"text": text, "span": (400, 400 + len(text)), "span_turn_id": "s1t1"}
        )

    elsewhere = passage("Step 3: solder the header to the board before flashing it.")
    moved = current_first(store, "a", q, [elsewhere, filler(0)])
    assert moved is not None
    shown = next(i for i in moved[0] if i.item_id == elsewhere.item_id)
    assert not shown.superseded_by and shown.valid_to is None
    assert "replaced" not in next(x for x in moved[1].splitlines() if elsewhere.text in x)
    # a window may cut more than the turn its `span` names: its words decide for every turn
    window = elsewhere.model_copy(
        update={"kind": "window", "turn_ids": ["s1t1", "s1t2"], "span_turn_id": "s1t2"}
    )
    moved = current_first(store, "a", q, [window, filler(0)])
    assert moved is not None
    assert not next(i for i in moved[0] if i.item_id == window.item_id).superseded_by
    says_it = passage(f"### Heating\n{SAID[0][3]}")
    moved = current_first(store, "a", q, [says_it, filler(0)])
    assert moved is not None
    marked = next(i for i in moved[0] if i.item_id == says_it.item_id)
    assert marked.superseded_by == [record_ids(store)[SAID[2][3]]]


async def test_current_first_moves_a_newer_value_worded_apart_from_the_question(
    tmp_path: Path,
) -> None:
    store = await indexed(tmp_path)
    q = "How much power on cold days?"  # "cold": the older statement's word only
    items = [filler(0), said_as_turn(0), filler(1), said_as_turn(2)]
    moved = current_first(store, "a", q, items)
    assert moved is not None
    assert [i.item_id for i in moved[0]] == ["a/s9/x0", "a/s2/s2t1", "a/s1/s1t1", "a/s9/x1"]
    # a question neither statement speaks of moves nothing
    aside = current_first(store, "a", "How many jars are on the shelf?", items)
    assert aside is not None and [i.item_id for i in aside[0]] == [i.item_id for i in items]


async def test_a_question_sharing_only_now_with_a_change_moves_nothing(tmp_path: Path) -> None:
    """ "now" is in every update ("now draws 650 watts"): a question about something else
    that asks what holds now is not about the heater, and the heater's change stays put."""
    store = await indexed(tmp_path)
    items = [filler(0), said_as_turn(0), filler(1)]
    moved = current_first(store, "a", "Where is the compass module now?", items)
    assert moved is not None and [i.item_id for i in moved[0]] == [i.item_id for i in items]
    # nor one that names no subject at all
    aside = current_first(store, "a", "What about it now?", items)
    assert aside is not None and [i.item_id for i in aside[0]] == [i.item_id for i in items]
    # the same question about the heater does bring today's value
    heater = current_first(store, "a", "How much does the heater draw now?", items)
    assert heater is not None and heater[0][1].text == SAID[2][3]


async def test_a_questions_subject_is_neither_when_nor_who_of_the_speakers() -> None:
    assert _subject("Where does Marta live now?", ["Marta", "assistant"]) == {"live"}
    assert _subject("What is Marta’s budget currently?", ["Marta"]) == {"budget"}
    assert _subject("Where does Marta live?", ["Ana"]) == {"marta", "live"}


async def test_current_first_puts_a_conflict_next_to_its_other_side(tmp_path: Path) -> None:
    store = await indexed(tmp_path)
    q = "Have I written a serial driver for the compass module?"
    items = [said_as_turn(3), filler(0), filler(1), said_as_turn(1)]
    moved = current_first(store, "a", q, items)
    assert moved is not None
    assert [i.item_id for i in moved[0]] == ["a/s2/s2t2", "a/s1/s1t2", "a/s9/x0", "a/s9/x1"]
    assert moved[0][0].conflict and moved[0][1].conflict and not moved[0][2].conflict


def at(n: int, text: str, day: datetime, session: str = "s1") -> EvidenceItem:
    return EvidenceItem(
        kind="turn",
        item_id=f"a/{session}/t{n}",
        text=text,
        turn_ids=[f"t{n}"],
        session_id=session,
        date=day,
    )


def said_when(item: EvidenceItem) -> tuple[datetime, str, int] | None:
    """Dates and sessions as the items carry them; the exchange position from the turn id;
    an undated item has no known time."""
    if item.date is None:
        return None
    return (item.date, item.session_id, int(item.turn_ids[0][1:]))


async def test_later_first_puts_the_later_of_two_items_about_one_subject_above() -> None:
    d1, d2 = datetime(2024, 3, 1), datetime(2024, 4, 2)
    old = at(1, "The kiln preheat on the big kiln takes 70 minutes.", d1)
    new = at(2, "The big kiln preheat now takes 55 minutes after the new vents.", d2, "s2")
    items = [filler(0), old, filler(1), new, filler(2)]
    q = "What is the preheat time of the big kiln?"
    moved = later_first(q, items, said_when)
    assert [i.item_id for i in moved] == [
        i.item_id for i in [filler(0), new, old, filler(1), filler(2)]
    ]
    # the past, a span between two things, or a question that is not about a value: kept
    for other in (
        "What was the preheat time of the big kiln before?",
        "What preheat time did I give for the big kiln?",
        "What is the preheat time?",  # too little asked to tell the two are about it
        "How many days passed between the two kiln preheats?",
        "Can you help me plan the big kiln preheat?",
    ):
        assert later_first(other, items, said_when) == items
    # two sessions of one date are not ordered; within one session the later turn is later
    same_day = at(2, new.text, d1, "s2")
    assert later_first(q, [old, same_day], said_when) == [old, same_day]
    in_session = at(3, new.text, d1)
    assert later_first(q, [old, in_session], said_when) == [in_session, old]
    # an item about another subject stays below
    unrelated = at(4, "The glaze order shipped with 12 jars for the studio kiln.", d2, "s2")
    assert later_first(q, [old, unrelated], said_when) == [old, unrelated]


async def test_an_account_comes_beside_a_head_item_that_denies_it() -> None:
    d1 = datetime(2024, 3, 1)
    never = at(1, "I've never fired the big kiln on my own, so I need a checklist.", d1)
    did = at(30, "I fired the big kiln on my own last Sunday and the glaze held.", d1)
    head = [never, *(filler(n) for n in range(9))]
    items = [*head, filler(20), did]
    moved = account_beside_denial("Have I ever fired the big kiln on my own?", items, HEAD)
    assert [i.item_id for i in moved[:3]] == [never.item_id, did.item_id, "a/s9/x0"]
    assert len(moved) == len(items)
    # a question that does not ask whether it was done keeps the order
    assert account_beside_denial("What glaze did I use in the big kiln?", items, HEAD) == items
    # an account that only shares the subject's words is not the denied act
    talk = at(31, "The big kiln is in the shared studio.", d1)
    assert account_beside_denial("Have I fired the big kiln?", [*head, talk], HEAD) == [*head, talk]


async def test_a_value_changed_back_in_the_same_words_is_current_again(tmp_path: Path) -> None:
    """900 watts, now 650, then 900 again word for word: the repetition is the first
    statement's record, and it stands as the current value from the day it was said again
    (its raw turns, dated by their sayings, do not undo that), until the session that said
    it again is forgotten."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    indexer = IndexerService(store, HashEmbedder())
    back = ("s3", datetime(2024, 5, 10), "s3t1", SAID[0][3])
    await said_in_turns(indexer, HashEmbedder(), [SAID[0], SAID[2], back])
    svc = QueryService(QueryDeps(store, HashEmbedder()))
    q = request("How many watts does the greenhouse heater draw?")

    reply = await svc.search(q)
    items, rid_of = reply.evidence, record_ids(store)
    again, was = (items[first_saying(items, SAID[i][3])] for i in (0, 2))
    assert first_saying(items, SAID[0][3]) < first_saying(items, SAID[2][3])
    assert again.supersedes == [rid_of[SAID[2][3]]]
    assert again.valid_from == "2024-05-10" and not again.superseded_by
    assert was.superseded_by == [rid_of[SAID[0][3]]] and was.valid_to == "2024-05-10"
    (record,) = [e for e in items if e.kind == "record" and e.text == SAID[0][3]]
    assert record.turn_ids == ["s1t1", "s3t1"]  # the repetition is the first statement's record

    await indexer.forget("a", "s3", {})
    items = (await svc.search(q)).evidence
    assert first_saying(items, SAID[2][3]) < first_saying(items, SAID[0][3])
    assert items[first_saying(items, SAID[0][3])].valid_to == "2024-04-02"


async def test_a_value_after_one_said_again_replaces_it(tmp_path: Path) -> None:
    """900, now 650, 900 again, now 700: the 700 is current and replaces the 900 said last
    before it, though the rules linked it to the 650 it followed in their order."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    indexer = IndexerService(store, HashEmbedder())
    last = "The greenhouse heater now draws 700 watts at night."
    await said_in_turns(
        indexer,
        HashEmbedder(),
        [
            SAID[0],
            SAID[2],
            ("s3", datetime(2024, 5, 10), "s3t1", SAID[0][3]),
            ("s4", datetime(2024, 6, 10), "s4t1", last),
        ],
    )
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(
        request("How many watts does the greenhouse heater draw?")
    )
    items, rid_of = reply.evidence, record_ids(store)
    now, nine = items[first_saying(items, last)], items[first_saying(items, SAID[0][3])]
    assert (
        first_saying(items, last)
        < first_saying(items, SAID[0][3])
        < first_saying(items, SAID[2][3])
    )
    assert not now.superseded_by and rid_of[SAID[0][3]] in now.supersedes
    assert nine.superseded_by == [rid_of[last]] and nine.valid_to == "2024-06-10"


async def test_a_record_carries_its_own_links_not_those_of_its_turns_other_records(
    tmp_path: Path,
) -> None:
    """One message gave a value and a standing rule; a later message changed the value. The
    value's record is marked replaced, the rule's record of the same turn is not (an agent
    told "replaced" would drop the rule)."""
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    rule = "Ann always wants the wiring diagram before the parts list."
    said = Turn(role=Role.user, content=f"{SAID[0][3]} {rule}", speaker="Ann")
    ex = SegmentExchange(exchange_id="s1:e0", seq=0, turn_ids=["s1t1"], turns=[said], tokens=20)
    seg = segment_of([ex], date=datetime(2024, 3, 1), ns="a", session="s1", index=0)
    first = make_batch(
        seg,
        [
            build_record(seg, MemoryType.fact, SAID[0][3], ["s1t1"], source_role="user"),
            build_record(seg, MemoryType.constraint, rule, ["s1t1"], source_role="user"),
        ],
    )
    later = statement("a", "s2", 1, datetime(2024, 4, 2), SAID[2][3], "s2t1")
    await IndexerService(store, HashEmbedder()).write(IndexBatch(records=[first]))
    await IndexerService(store, HashEmbedder()).write(IndexBatch(records=[later]))
    ids = record_ids(store) | {rule: store.records.of_kind("a", "constraint", "user")[0]["id"]}
    items = [
        EvidenceItem(
            kind="record", item_id=f"a/record/{ids[t]}", text=t, turn_ids=["s1t1"], session_id="s1"
        )
        for t in (rule, SAID[0][3])
    ]
    moved = current_first(store, "a", "How many watts does the greenhouse heater draw?", items)
    assert moved is not None
    marks = {i.text: i.superseded_by for i in moved[0]}
    assert marks[rule] == [] and marks.get(SAID[0][3], [ids[SAID[2][3]]]) == [ids[SAID[2][3]]]
    # the value's record, asked about alone, is marked by what replaced it
    (value,) = (i for i in items if i.text == SAID[0][3])
    moved = current_first(store, "a", "What did the heater draw in March?", [value, *items[:1]])
    assert moved is not None
    assert {i.text: i.superseded_by for i in moved[0]}[SAID[0][3]] == [ids[SAID[2][3]]]
    # the turn says both: it names the value replaced, and says the rest was not
    turn = EvidenceItem(
        kind="turn", item_id="a/turn/s1t1", text=said.content, turn_ids=["s1t1"], session_id="s1"
    )
    moved = current_first(store, "a", "What did the heater draw in March?", [turn], room=2)
    assert moved is not None
    (marked,) = (i for i in moved[0] if i.kind == "turn")
    assert marked.superseded_by == [ids[SAID[2][3]]]
    assert marked.replaced_values == ["900 watts"]
    assert currency_notes(marked)[1:] == ["the rest of it was not said to change"]
    # a turn that says nothing else is replaced whole
    alone = turn.model_copy(update={"item_id": "a/turn/s1t9", "text": SAID[0][3]})
    moved = current_first(store, "a", "What did the heater draw in March?", [alone], room=2)
    assert moved is not None
    (marked,) = (i for i in moved[0] if i.kind == "turn")
    assert marked.superseded_by and marked.replaced_values == []


async def test_a_small_budget_keeps_the_newer_value_when_its_long_item_does_not_fit(
    tmp_path: Path,
) -> None:
    """The newer value only in a long window, which a budget passes over, and the older value's
    short record kept: the newer statement's record comes in right above it."""
    store = await indexed(tmp_path)
    question = "How many watts does the greenhouse heater draw now?"
    reply = await QueryService(QueryDeps(store, HashEmbedder())).search(request(question))
    older = reply.evidence[first_saying(reply.evidence, SAID[0][3])]
    window = EvidenceItem(
        kind="window",
        item_id="a/s2/s2t1",
        text=f"{SAID[2][3]} " + "The assistant explains wiring at length. " * 60,
        turn_ids=["s2t1"],
        session_id="s2",
    )
    kept, context, tokens = current_within(store, "a", question, [window, older], 150)
    assert [e.text for e in kept] == [SAID[2][3], SAID[0][3]] and tokens <= 150
    assert kept[0].supersedes == [rid(older)] and kept[1].superseded_by == [rid(kept[0])]
    assert "[replaced on 2 April 2024 by a later statement]" in context
    alone, _, _ = within_budget([window, older], 150)  # what the budget alone would keep
    assert [e.text for e in alone] == [SAID[0][3]]
