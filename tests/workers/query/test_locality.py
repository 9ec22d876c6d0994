"""Conversation locality: items next to the first ones move up (pure, hand-built)."""

from __future__ import annotations

from tests.workers.query.test_selection import cand, fused, ids
from workers.query.locality import near_first
from workers.query.presets import Near
from workers.query.selection import Fused
from workers.query.service import selection_size


def test_near_first_moves_items_next_to_the_first_ones_up() -> None:
    """Items within two exchanges of the first three's turns, in their session, move 20
    places up; the first three, the rest of the order and what lies past the pool stay."""

    def item(i: str, turn: str, session: str = "s1") -> Fused:
        return fused(cand(i, session=session, turns=(turn,)), 1.0)

    seqs = {("s1", f"t{n}"): n for n in range(40)} | {("s2", "t5"): 5}
    first = [item("a", "t10"), item("b", "t30"), item("c", "t31")]
    far = [item(f"f{n}", f"t{20 + n}") for n in range(5)]  # t20..t24: none near t10, t30, t31
    near = item("n", "t12")  # two exchanges after t10
    other = item("o", "t5", session="s2")  # near t10 by position, in another session
    unknown = item("u", "t99")  # no position: never near
    chosen = [*first, *far, other, unknown, near, item("late", "t11")]
    how = Near(top=3, radius=2, bonus=20)
    out = ids(near_first(chosen, seqs, len(chosen) - 1, how))
    assert out[:3] == ["a", "b", "c"]
    assert out[3] == "n" and out[-1] == "late"  # past the pool: not moved
    assert out[4:-1] == ["f0", "f1", "f2", "f3", "f4", "o", "u"]
    assert ids(near_first(chosen, {}, len(chosen), how)) == ids(chosen)


def test_a_short_request_gives_the_locality_its_whole_pool() -> None:
    """A request for fewer items than `led_pool` still has selection pick `led_pool` when
    the lead or the locality reads them, so an item near the first ones can move into the
    few the reply keeps; when nothing reads them, selection picks what is asked."""
    assert selection_size(10, 30, read=True) == 30
    assert selection_size(10, 30, read=False) == 10
    assert selection_size(100, 30, read=True) == 100
