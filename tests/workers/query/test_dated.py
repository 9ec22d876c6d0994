"""A question that asks when: a record that does not state its date is followed by its
turn's record that does."""

from __future__ import annotations

from workers.query.dated import dated_siblings
from workers.query.selection import Candidate, Fused


def item(
    item_id: str, turn: str, date: str | None = None, kind: str = "record", said: str = "2024-03-02"
) -> Fused:
    c = Candidate(
        item_id=item_id,
        kind=kind,  # type: ignore[arg-type]
        text=item_id,
        session_id="s1",
        turn_ids=(turn,),
        date=date or said,
        mentioned=f"{said}T18:00:00",
    )
    return Fused(c, rrf=0.0, best=0.0, route_score=0.0, routes=())


def ids(items: list[Fused]) -> list[str]:
    return [f.item_id for f in items]


def test_the_dated_record_of_the_turn_comes_right_after_the_undated_one() -> None:
    signed, other, third = item("signed-up", "t1"), item("ran", "t2"), item("coach", "t3")
    when = item("on-may-19", "t1", date="2024-05-19")
    pool = [signed, other, third, item("x", "t9"), when]
    assert ids(dated_siblings([signed, other, third], pool, 3)) == [
        "signed-up",
        "on-may-19",
        "ran",
        "coach",
    ]
    # further down the choice: it moves up, nothing is repeated
    chosen = [signed, other, third, when]
    assert ids(dated_siblings(chosen, pool, 3)) == ["signed-up", "on-may-19", "ran", "coach"]


def test_nothing_moves_when_the_date_is_shown_or_there_is_none() -> None:
    signed, when = item("signed-up", "t1"), item("on-may-19", "t1", date="2024-05-19")
    window = item("window", "t1", kind="window")
    other = item("ran", "t2")
    assert ids(dated_siblings([when, signed, other], [when, signed, other], 3)) == [
        "on-may-19",
        "signed-up",
        "ran",
    ]
    assert ids(dated_siblings([window, signed, other], [window, signed, when], 3)) == [
        "window",
        "signed-up",
        "ran",
    ]
    assert ids(dated_siblings([signed, other], [signed, other], 2)) == ["signed-up", "ran"]
    # past the head: left where it is
    assert ids(dated_siblings([other, signed], [other, signed, when], 1)) == ["ran", "signed-up"]
