"""A stated change first, without a link: the rule over given cosines, and the query service
with the real model, where the offline rules link nothing for a move."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest

from schemas import EvidenceItem
from tests.workers.builders import said_in_turns
from tests.workers.query.test_currency import first_saying, request
from workers.embedding import Embedder
from workers.indexer.service import IndexerService
from workers.query.changed import asks_a_state, change_first, clauses, stated_change
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

JAN, MAR = datetime(2024, 1, 10), datetime(2024, 3, 12)
Q = "Where do I live?"


def said(n: int, text: str, day: datetime) -> EvidenceItem:
    return EvidenceItem(
        kind="turn",
        item_id=f"a/s{n}/t{n}",
        text=text,
        turn_ids=[f"t{n}"],
        session_id=f"s{n}",
        date=day,
    )


def when(item: EvidenceItem) -> tuple[datetime, str, int] | None:
    return None if item.date is None else (item.date, item.session_id, 0)


def cosines(table: dict[tuple[str, str], float]):  # type: ignore[no-untyped-def]
    def alike(text: str, others: Sequence[str]) -> list[float]:
        return [table.get((text, o), 0.0) for o in others]

    return alike


HOME = said(1, "I live in Porto with my partner.", JAN)
MOVE = said(2, "We just moved to Lisbon last week.", MAR)
EDITOR = said(3, "I switched my editor to VS Code.", MAR)
OTHER = said(4, "The dog loves the beach.", MAR)


def test_a_later_change_like_a_first_item_goes_right_above_it() -> None:
    alike = cosines({(HOME.text, MOVE.text): 0.59, (HOME.text, EDITOR.text): 0.19})
    items = [HOME, OTHER, EDITOR, MOVE]
    assert change_first(Q, items, when, alike, 10) == [MOVE, HOME, OTHER, EDITOR]


def test_a_change_that_a_link_says_was_replaced_stays_below() -> None:
    """A value said again carries its first saying's date: the link, not the date, orders it."""
    alike = cosines({(HOME.text, MOVE.text): 0.59})
    assert change_first(Q, [HOME, MOVE], when, alike, 10, lambda a, b: a is HOME) == [HOME, MOVE]


def test_nothing_moves_for_an_unlike_change_an_earlier_one_or_an_undated_one() -> None:
    alike = cosines({(HOME.text, EDITOR.text): 0.19, (MOVE.text, HOME.text): 0.59})
    assert change_first(Q, [HOME, EDITOR], when, alike, 10) == [HOME, EDITOR]
    assert change_first(Q, [MOVE, HOME], when, alike, 10) == [MOVE, HOME]  # already first
    undated = MOVE.model_copy(update={"date": None})
    assert change_first(Q, [HOME, undated], when, cosines({(HOME.text, MOVE.text): 0.9}), 10) == [
        HOME,
        undated,
    ]
    # past the head: not read
    far = [HOME, OTHER, OTHER, MOVE]
    assert change_first(Q, far, when, cosines({(HOME.text, MOVE.text): 0.9}), 3) == far


async def served(
    tmp_path: Path, embedder: Embedder, move: EvidenceItem, home: EvidenceItem = HOME
) -> QueryService:
    """A store of where one lived, a move and an unrelated change, written by the indexer."""
    store = EvidenceStore(str(tmp_path / "db"), embedder.model_name, embedder.dim)
    indexer = IndexerService(store, embedder)
    said = []
    for item in (home, move, EDITOR):
        assert item.date is not None
        said.append((item.session_id, item.date, item.turn_ids[0], item.text))
    await said_in_turns(indexer, embedder, said)
    assert store.links.of_namespace("a") == []  # a move: no value for the rules to link
    return QueryService(QueryDeps(store, embedder))


@pytest.mark.parametrize(
    "move",
    [
        MOVE,
        said(5, "I'm in Lisbon these days.", MAR),
        said(6, "We are now based in Lisbon.", MAR),
    ],
    ids=["moved", "these-days", "now-based"],
)
@pytest.mark.asyncio
async def test_where_one_lives_now_reads_the_move_first(
    tmp_path: Path, embedder: Embedder, move: EvidenceItem
) -> None:
    svc = await served(tmp_path, embedder, move)
    now = (await svc.search(request("Where do I live now?"))).evidence
    assert (
        first_saying(now, move.text) < first_saying(now, HOME.text) < first_saying(now, EDITOR.text)
    )


@pytest.mark.asyncio
async def test_a_move_is_read_against_the_clause_that_says_where_one_lives(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Whole, the two messages are not alike (each says more than where one lives); their
    clauses are."""
    home = said(8, "Hi, I'm Ann. I live in Porto and I work as a data engineer at a bakery.", JAN)
    move = said(9, "Big news: I moved to Lisbon last week, the new flat is near the river.", MAR)
    svc = await served(tmp_path, embedder, move, home)
    now = (await svc.search(request("Where do I live?"))).evidence
    assert first_saying(now, move.text) < first_saying(now, home.text)


@pytest.mark.asyncio
async def test_where_one_lived_before_keeps_retrievals_order(
    tmp_path: Path, embedder: Embedder
) -> None:
    svc = await served(tmp_path, embedder, MOVE)
    before = (await svc.search(request("Where did I live before?"))).evidence
    assert first_saying(before, HOME.text) < first_saying(before, MOVE.text)


@pytest.mark.parametrize(
    ("question", "state"),
    [
        ("Where do I live now?", True),
        ("Which editor does Ann use?", True),
        ("What is my monthly budget?", True),
        ("How many cats do I have now?", True),
        ("What car does Ann have at the moment?", True),
        ("How many talks have I given this year?", False),  # what has come about
        ("What events has Ann taken part in?", False),
        ("Where has Ann made friends?", False),
        ("What made Ann start running?", False),
    ],
)
def test_a_state_is_asked_for_as_it_stands_not_what_has_come_about(
    question: str, state: bool
) -> None:
    assert asks_a_state(question) is state


def test_an_item_is_read_by_its_clauses_and_a_change_by_the_clause_that_states_it() -> None:
    window = "User: Hi, I'm Ann. I live in Porto and I work at a bakery.\nAssistant: Welcome!"
    assert clauses(window) == ["I live in Porto", "I work at a bakery."]
    assert stated_change("User: Big news: we moved to Lisbon, the flat is new.") == (
        "we moved to Lisbon"
    )
    assert stated_change("Now, I live in Lisbon.") == "Now, I live in Lisbon."  # one clause
    assert stated_change("The flat is near the river.") is None


def test_the_item_is_read_by_its_clause_that_answers_the_question() -> None:
    """Where one lives and where one works, in one message: the move answers the first
    question, the new job the second."""
    home = said(10, "I live in Porto and I work at a bakery.", JAN)
    job = said(11, "I started a new job at a bank.", MAR)
    live, work = "Where do I live now?", "Where do I work now?"
    alike = cosines(
        {
            (live, "I live in Porto"): 0.6,
            (live, "I work at a bakery."): 0.1,
            (work, "I live in Porto"): 0.1,
            (work, "I work at a bakery."): 0.6,
            ("I live in Porto", MOVE.text): 0.6,
            ("I live in Porto", job.text): 0.2,
            ("I work at a bakery.", MOVE.text): 0.1,
            ("I work at a bakery.", job.text): 0.6,
        }
    )
    items = [home, OTHER, job, MOVE]
    assert change_first(live, items, when, alike, 10) == [MOVE, home, OTHER, job]
    assert change_first(work, items, when, alike, 10) == [job, home, OTHER, MOVE]


def test_the_most_alike_change_moves() -> None:
    alike = cosines({(HOME.text, EDITOR.text): 0.45, (HOME.text, MOVE.text): 0.6})
    assert change_first(Q, [HOME, EDITOR, MOVE], when, alike, 10) == [MOVE, HOME, EDITOR]


@pytest.mark.parametrize(
    ("later", "moves"),
    [
        ("We just moved to Lisbon.", True),
        ("I'm in Lisbon these days.", True),
        ("Nowadays we are in Lisbon.", True),
        ("Ann is now in Lisbon.", True),  # an encoder's record names the speaker
        ("We now live in Lisbon.", True),
        ("Lisbon was lovely in May.", False),  # no change stated
        ("Now I live in Lisbon.", True),
        ("I’m now based in Lisbon.", True),  # a typographic apostrophe
        ("I now work at a bakery in Lisbon.", True),
        ("I'm now working on the Lisbon map.", False),  # a task, not a job
        ("I'm currently working on a trip to Lisbon.", False),
        ("I'm living in Lisbon now.", True),
        ("Now I worked out the bug in Lisbon.", False),
        ("I work best at night, now what about Lisbon?", False),
        ("I live in Lisbon now.", True),
        ("She's now living in Lisbon.", True),
        ("One of these days I'll see Lisbon.", False),  # a future
        ("It's now in your cart.", False),  # a thing, not a person
        ("This is now at version 2.", False),
        ("We are now at step 3.", False),
        ("Now, let us look at Lisbon.", False),  # "now" that opens a step
        ("Now use the map of Lisbon.", False),
        ("You now have a map of Lisbon.", False),
        ("It's now time to leave Lisbon.", False),
        ("I started looking into Lisbon.", False),  # a start, not a new state
    ],
)
def test_a_change_is_stated_in_several_forms(later: str, moves: bool) -> None:
    change = said(7, later, MAR)
    items = [HOME, OTHER, change]
    moved = change_first(Q, items, when, cosines({(HOME.text, later): 0.6}), 10)
    assert (moved[0] is change) is moves


def test_a_move_goes_above_where_one_lives_however_unlike_the_two_cities_read() -> None:
    """The model reads "I live in Lisbon" and "I moved to Berlin last week" apart; their words
    say a move changes where one lives (and a new job where one works), not what one does."""
    lives = said(5, "I live in Lisbon.", JAN)
    moved = said(6, "I moved to Berlin last week.", MAR)
    works = said(7, "I work as a nurse at the city hospital.", JAN)
    job = said(8, "I started a new job at the clinic.", MAR)
    alike = cosines({})  # every pair reads 0.0
    assert change_first(Q, [lives, OTHER, moved], when, alike, 10) == [moved, lives, OTHER]
    assert change_first("Where do I work?", [works, job], when, alike, 10) == [job, works]
    # a move is no change of one's job, nor a switch of editor one of where one lives
    assert change_first("Where do I work?", [works, moved], when, alike, 10) == [works, moved]
    assert change_first(Q, [lives, EDITOR], when, alike, 10) == [lives, EDITOR]
    # a thing moved is no move of one's home
    files = said(9, "I moved my files to the new folder.", MAR)
    meeting = said(10, "We moved the standup to Friday.", MAR)
    assert change_first(Q, [lives, files, meeting], when, alike, 10) == [lives, files, meeting]
    # nor a tool's move, nor another person's state or new job
    tools = said(11, "We moved from Slack to Teams.", MAR)
    ana = said(12, "Ana lives in Porto.", JAN)
    assert change_first(Q, [lives, tools], when, alike, 10) == [lives, tools]
    assert change_first(Q, [ana, moved], when, alike, 10) == [ana, moved]
