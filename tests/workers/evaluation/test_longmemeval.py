"""The LongMemEval loader and metrics on a small file in the official layout."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from workers.datasets import Skipped
from workers.errors import DatasetError
from workers.evaluation.longmemeval import (
    build_longmemeval_report,
    evaluate_rankings,
    is_abstention,
    load_longmemeval,
    to_name,
)
from workers.evaluation.report import format_longmemeval_table, validate_longmemeval_report

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$")

INSTANCES: list[dict[str, Any]] = [
    {
        "question_id": "q001",
        "question_type": "single-session-user",
        "question": "What colour is the bike I bought?",
        "answer": "red",
        "question_date": "2023/06/01 (Thu) 09:00",
        "haystack_session_ids": ["chat_a", "answer_1"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "what time is it"},
                {"role": "assistant", "content": "noon"},
            ],
            [
                {"role": "user", "content": "I bought a red bike", "has_answer": True},
                {"role": "assistant", "content": "nice", "has_answer": False},
                {"role": "user", "content": "thanks", "has_answer": False},
            ],
        ],
        "answer_session_ids": ["answer_1"],
    },
    {
        "question_id": "q 002/x_abs",
        "question_type": "temporal-reasoning",
        "question": "When did I sell my boat?",
        "answer": "You did not mention this information.",
        "question_date": "2023/06/02 (Fri) 18:30",
        "haystack_session_ids": ["chat b"],
        "haystack_dates": ["2023/04/01 (Sat) 08:00"],
        "haystack_sessions": [
            [
                {"role": "assistant", "content": "welcome back"},
                {"role": "user", "content": "   "},
                {"role": "user", "content": "tell me a joke"},
                {"role": "assistant", "content": "a short one"},
            ]
        ],
        "answer_session_ids": [],
    },
]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "longmemeval_tiny.json"
    p.write_text(json.dumps(INSTANCES))
    return p


def test_names() -> None:
    assert to_name("q001") == "q001"
    changed = to_name("q 002/x_abs")
    assert NAME.match(changed) and changed.startswith("q_002_x_abs-") and changed != "q_002_x_abs"
    assert to_name("_x") != to_name("x_") and NAME.match(to_name("_x"))
    assert NAME.match(to_name("a" * 300)) and len(to_name("a" * 300)) == 128
    assert to_name("a" * 300) != to_name("a" * 301)
    assert is_abstention("q 002/x_abs") and not is_abstention("q001")


def test_loader(path: Path) -> None:
    first, second = load_longmemeval(path)
    assert first.namespace == "q001" and not first.abstention
    assert NAME.match(second.namespace) and second.abstention
    assert first.question_date == datetime(2023, 6, 1, 9, 0)
    assert first.session_ids == ("chat_a", "answer_1")

    exs = first.exchanges
    assert [(e.session_id, e.seq, e.exchange_id) for e in exs] == [
        ("chat_a", 0, "chat_a:0"),
        ("chat_a", 1, "chat_a:2"),
        ("answer_1", 0, "answer_1:0"),
        ("answer_1", 1, "answer_1:2"),
    ]
    assert all(e.namespace == "q001" for e in exs)
    assert [e.turn_ids() for e in exs[:2]] == [["chat_a:0", "chat_a:1"], ["chat_a:2", "chat_a:3"]]
    assert [t.role.value for t in exs[0].turns] == ["user", "assistant"]
    assert exs[0].session_date == datetime(2023, 5, 20, 2, 21)
    assert exs[2].session_date == datetime(2023, 5, 21, 10, 0)
    assert first.gold_sessions == {"answer_1"}
    assert first.gold_turns == {"answer_1:0"}
    assert first.turn_session["answer_1:1"] == "answer_1"

    # a leading assistant message stands alone; an empty message is skipped but keeps its index
    (sid,) = second.session_ids
    assert NAME.match(sid) and sid != "chat b"
    assert [e.turn_ids() for e in second.exchanges] == [[f"{sid}:0"], [f"{sid}:2", f"{sid}:3"]]
    assert second.gold_turns == frozenset() and second.gold_sessions == frozenset()

    lines = dict(first.turn_lines())
    assert lines["answer_1:0"] == "[21 May 2023] user: I bought a red bike"


def test_metrics_on_a_turn_ranking(path: Path) -> None:
    first, _ = load_longmemeval(path)
    ranked = ["chat_a:0", "answer_1:2", "answer_1:0", "chat_a:2"]
    m = evaluate_rankings(first, ranked, "turn")
    # turn level: the one gold turn is third
    assert m["turn"]["recall_any@1"] == 0.0 and m["turn"]["recall_any@3"] == 1.0
    assert m["turn"]["ndcg_any@3"] == pytest.approx(1 / 1.584962500721156)  # 1/log2(3)
    # session level: [chat_a, answer_1] after dedup; rank 2 is undiscounted officially
    assert m["session"]["recall_any@1"] == 0.0 and m["session"]["recall_all@3"] == 1.0
    assert m["session"]["ndcg_any@3"] == pytest.approx(1.0)
    assert set(m["turn"]) == {
        f"{name}@{k}"
        for name in ("recall_any", "recall_all", "ndcg_any")
        for k in (1, 3, 5, 10, 30, 50)
    }

    s = evaluate_rankings(first, ["answer_1", "chat_a"], "session")
    assert s["session"]["recall_any@1"] == 1.0 and s["turn"] == {}


def test_report_skips_abstention(path: Path) -> None:
    first, second = load_longmemeval(path)
    rows = [
        (first.question_id, evaluate_rankings(first, ["answer_1:0"], "turn")),
        (second.question_id, evaluate_rankings(second, [], "turn")),
    ]
    report = build_longmemeval_report(str(path), "turn", rows)
    assert report.questions == 1 and report.skipped_abstention == 1
    assert report.metrics["session"]["ndcg_any@1"] == 1.0
    assert report.metrics["turn"]["recall_all@50"] == 1.0
    assert validate_longmemeval_report(report.to_json_dict()) == report
    assert "session level" in format_longmemeval_table(report)


def test_loader_errors(tmp_path: Path) -> None:
    bad = dict(INSTANCES[0], haystack_dates=["2023/05/20 (Sat) 02:21"])
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([bad]))
    with pytest.raises(DatasetError, match="2 session ids, 1 dates"):
        load_longmemeval(p)


def test_loader_skips_a_message_the_contract_refuses_alone(tmp_path: Path) -> None:
    inst = json.loads(json.dumps(INSTANCES[0]))
    inst["haystack_sessions"][0][2]["content"] = "w" * 200_001  # the user's second message
    p = tmp_path / "long.json"
    p.write_text(json.dumps([inst]))
    skipped: list[Skipped] = []
    (first,) = load_longmemeval(p, skipped)
    # the reply after it stands alone; every other id is where it was
    assert [e.turn_ids() for e in first.exchanges[:2]] == [["chat_a:0", "chat_a:1"], ["chat_a:3"]]
    assert [e.seq for e in first.exchanges[:2]] == [0, 1]
    assert len(first.exchanges) == 4
    assert skipped == [
        Skipped(
            str(p), "content: 200,001 characters, at most 200,000", "q001", "chat_a", "chat_a:2"
        )
    ]
    with pytest.raises(DatasetError, match="chat_a:2: content: 200,001 characters"):
        load_longmemeval(p)
