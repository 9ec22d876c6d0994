"""Where the console's timeline shows each turn (`streams.gateway.browse.placed`)."""

from __future__ import annotations

from typing import Any

from streams.gateway.browse import placed

SEGMENTS = [
    {"id": "ns/s/0", "first_seq": 0, "last_seq": 1},
    {"id": "ns/s/1", "first_seq": 3, "last_seq": 4},
]


def turn(seq: int, memory: bool = True) -> dict[str, Any]:
    return {"seq": seq, "memory": memory}


def test_a_tool_item_between_segments_is_shown_with_the_turns_before_it() -> None:
    turns = [turn(0), turn(1), turn(2, False), turn(3), turn(4), turn(5, False), turn(6)]
    placed(turns, SEGMENTS)
    assert [t["segment_id"] for t in turns] == [
        "ns/s/0",
        "ns/s/0",
        "ns/s/0",  # a tool item: not waiting for a segment
        "ns/s/1",
        "ns/s/1",
        "ns/s/1",
        None,  # a message the open segment holds
    ]


def test_a_page_opening_with_tool_items_shows_them_with_the_turns_after() -> None:
    turns = [turn(2, False), turn(3)]
    placed(turns, SEGMENTS)
    assert [t["segment_id"] for t in turns] == ["ns/s/1", "ns/s/1"]
    alone = [turn(7, False)]
    placed(alone, SEGMENTS)
    assert alone[0]["segment_id"] is None
