"""`tests.evals.first_questions`: which questions it asks, and what it prints."""

from __future__ import annotations

from pathlib import Path

from streams.bench.harness import load_reported
from tests.evals.first_questions import first_questions, summary, written_again
from tests.streams.bench.files import write_locomo


def test_each_conversations_first_asked_questions_are_taken_in_order(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    write_locomo(data)
    convs, _ = load_reported(data)
    wanted = [qa.question for qa in convs[0].qa if qa.category in (1, 2, 3, 4)]
    assert first_questions(convs) == {"tiny": wanted[:2]}
    assert first_questions(convs, n=10)["tiny"] == wanted  # never an adversarial one (5)
    assert "Is this adversarial?" not in wanted


def test_a_summary_gives_the_median_and_the_nearest_rank_p95() -> None:
    line = summary("load alone", [float(i) for i in range(1, 101)])
    assert line.split() == ["load", "alone", "n=100", "p50", "50.5", "p95", "95.0"]


def test_a_write_again_is_the_last_exchange_alone_in_a_new_session(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    write_locomo(data)
    conv = load_reported(data)[0][0]
    again = written_again(conv, "again-0")
    last = conv.sessions[-1].exchanges[-1]
    assert again.namespace == conv.namespace and [s.session_id for s in again.sessions] == [
        "again-0"
    ]
    (exchange,) = again.sessions[0].exchanges
    assert exchange.session_id == "again-0" and exchange.seq == 0
    assert exchange.turns == last.turns and exchange.exchange_id == last.exchange_id
