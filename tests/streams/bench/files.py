"""A tiny conversation in the LoCoMo layout, written by the benchmark tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SESSION_1 = [
    ("Mara", "I finally planted the tomato seedlings on the balcony this morning, six of them."),
    ("Jonas", "Nice! Which variety did you go for in the end?"),
    (
        "Mara",
        "Two San Marzano and four cherry tomatoes, the yellow kind from the market on Elm Street.",
    ),
    ("Jonas", "Do they get enough sun up there? Your balcony faces west, right?"),
    (
        "Mara",
        "About five hours of afternoon sun. I bought a second planter box to move them around.",
    ),
    ("Jonas", "By the way, did you book the train tickets for the jazz festival in Montreux?"),
    (
        "Mara",
        "Yes, July 6th, the 8:12 train, and I reserved seats on the left side for the lake view.",
    ),
    ("Jonas", "Perfect, I'll bring the picnic blanket and the folding chairs."),
]
SESSION_2 = [
    (
        "Jonas",
        "The festival was incredible. That trio on the lakeside stage on Saturday night was my favourite.",
    ),
    ("Mara", "Same! The double bass player had a solo that went on for ten minutes."),
    ("Jonas", "How are the tomatoes doing after the heatwave last week?"),
    ("Mara", "The cherry ones are fine, but one San Marzano wilted. I water them twice a day now."),
    ("Jonas", "My uncle swears by mulching with straw to keep the soil from drying out."),
    ("Mara", "Good idea, I'll try it this weekend. I also started a small basil pot next to them."),
    ("Jonas", "Basil and tomatoes, you are one mozzarella away from a caprese salad."),
    ("Mara", "That is exactly the plan for the first harvest in August."),
]


QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which tomato varieties did Mara plant?",
        "answer": "San Marzano and cherry",
        "evidence": ["D1:3"],
        "category": 4,
    },
    {
        "question": "Which train does Mara take to the jazz festival and when?",
        "answer": "8:12, July 6",
        "evidence": ["D1:7"],
        "category": 2,
    },
    {
        "question": "What happened to the tomatoes after the festival?",
        "answer": "one wilted",
        "evidence": ["D2:3", "D2:4"],
        "category": 1,
    },
    {
        "question": "What would Mara cook with basil?",
        "answer": "caprese",
        "evidence": ["D2:7", "D2:8"],
        "category": 3,
    },
    {"question": "Is this adversarial?", "answer": "n/a", "evidence": ["D1:1"], "category": 5},
    {"question": "A question without evidence", "answer": "n/a", "evidence": [], "category": 4},
]


TYPES: dict[str, tuple[str, dict[str, list[str]]]] = {
    "Which tomato varieties did Mara plant?": ("lookup", {}),
    "Which train does Mara take to the jazz festival and when?": ("lookup", {}),
    "What happened to the tomatoes after the festival?": (
        "update",
        {"original_info": ["D1:3"], "updated_info": ["D2:4"]},
    ),
    "What would Mara cook with basil?": (
        "conflict",
        {"first_statement": ["D2:6"], "second_statement": ["D2:8"]},
    ),
}


def typed(qa: Sequence[dict[str, Any]] = QUESTIONS) -> list[dict[str, Any]]:
    """`qa` as a file that types its questions and names the turns behind two statements
    writes it: a type for each question of `TYPES`, and its sources when it has some."""
    out = []
    for q in qa:
        kind, sources = TYPES.get(q["question"], (None, {}))
        extra = {"beam_type": kind} if kind else {}
        out.append({**q, **extra, **({"beam_sources": sources} if sources else {})})
    return out


OVERSIZED = "D1:9"  # the turn `write_locomo(oversized=True)` adds: over the contract's limit


def write_locomo(
    path: Path, qa: Sequence[dict[str, Any]] = QUESTIONS, oversized: bool = False
) -> None:
    """One sample, `tiny`, with the two sessions above and `qa`; `oversized` adds a last turn
    to session 1 that the contract refuses (a runaway reply of 200,001 characters)."""

    def turns(session: int, rows: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [
            {"speaker": s, "dia_id": f"D{session}:{i}", "text": t}
            for i, (s, t) in enumerate(rows, 1)
        ]

    runaway = {"speaker": "Jonas", "dia_id": OVERSIZED, "text": "ha" * 100_000 + "!"}
    conversation = {
        "speaker_a": "Mara",
        "speaker_b": "Jonas",
        "session_1_date_time": "6:10 pm on 2 June, 2024",
        "session_1": turns(1, SESSION_1) + ([runaway] if oversized else []),
        "session_2_date_time": "11:45 am on 14 July, 2024",
        "session_2": turns(2, SESSION_2),
    }
    path.write_text(
        json.dumps([{"sample_id": "tiny", "conversation": conversation, "qa": list(qa)}])
    )
