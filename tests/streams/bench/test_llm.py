"""`lychee bench llm` against the scripted fake LLM: every segment's outcome, the questions
whose evidence was encoded, planner fallbacks, answers and the judge's verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.bench.errors import BenchError
from streams.bench.llm import bench_llm
from streams.settings import Settings
from tests.fakes.openai_server import Action, FakeOpenAI, status, text, valid
from tests.streams.bench.files import write_locomo
from workers.encoder.prompts import SYSTEM_PROMPT
from workers.evaluation.judge import LOCOMO_JUDGE_SYSTEM
from workers.evaluation.judge_check import SANITY_PAIRS
from workers.query.answer import ANSWER_SYSTEM_PROMPT
from workers.query.planner.prompts import PLANNER_SYSTEM_PROMPT

ANSWER = "San Marzano and cherry tomatoes"
PLAN = {
    "reason": "one person, one fact",
    "question_type": "single",
    "semantic_queries": ["Mara tomatoes", "Mara planted"],
    "temporal_filter": None,
    "evidence_target": "what Mara planted",
    "evidence_constraints": [],
    "constraints": [],
    "evidence_routes": [
        {
            "evidence_goal": "Mara's plants",
            "queries": ["Mara tomatoes", "Mara balcony"],
            "constraints": [],
            "temporal_filter": None,
            "speaker": "Mara",
        }
    ],
}


def respond(body: dict[str, Any]) -> Action:
    """A reply chosen by the call's system prompt, as a real model would differ by task."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system == SYSTEM_PROMPT:
        # one record a segment, of its first turn's words (a record of other words is not
        # the segment's, `workers.encoder.grounded`)
        turns = body["messages"][1]["content"].split("<CURRENT_TURNS>\n", 1)[1]
        first = turns.split("\n", 1)[0].split(": ", 1)[1]
        record = {
            "memory_type": "event",
            "semantic_text": f"Mara said: {first}",
            "entities": ["Mara"],
            "temporal": {"t_ref": "", "t_valid_from": "", "t_valid_to": ""},
            "tags": ["tomatoes"],
            "evidence_turns": [0],
            "source_role": "user",
        }
        return valid({"records": [record], "disambiguation_context": "Mara and Jonas."})
    if system == PLANNER_SYSTEM_PROMPT:
        return text("no plan today") if "train" in user else valid(PLAN)
    if system == ANSWER_SYSTEM_PROMPT:
        return text(ANSWER)
    if system == LOCOMO_JUDGE_SYSTEM:
        return judged(user)
    raise AssertionError(f"unexpected call: {system[:80]}")


SANITY = {(p.question, p.answer): p.correct for p in SANITY_PAIRS}


def graded(user: str) -> tuple[str, str, str]:
    """(question, gold, answer) of a LoCoMo judge prompt."""
    question = user.split("Question: ")[-1].split("\n")[0]
    gold = user.split("Gold answer: ")[-1].split("\n")[0]
    return question, gold, user.split("Generated answer: ")[-1].split("\n")[0]


def judged(user: str) -> Action:
    """A sound judge: the sanity pairs' right verdicts, else CORRECT when the answer holds
    the gold's first word."""
    question, gold, answer = graded(user)
    right = SANITY.get((question, answer), bool(gold.split()) and gold.split()[0] in answer)
    label = "CORRECT" if right else "WRONG"
    return valid({"reasoning": "compared with the gold answer", "label": label})


def is_sanity_pair(body: dict[str, Any]) -> bool:
    return graded(body["messages"][-1]["content"])[::2] in SANITY


def settings_for(server: FakeOpenAI, tmp_path: Path, **llm: Any) -> Settings:
    return Settings.load(
        None,
        llm={"base_url": server.url, "model": "fake-llm", **llm},
        store={"uri": str(tmp_path / "unused")},
    )


def test_bench_llm_locomo_counts_outcomes_fallbacks_and_judged_accuracy(tmp_path: Path) -> None:
    data, out = tmp_path / "tiny.json", tmp_path / "report.json"
    write_locomo(data)
    lines: list[str] = []
    with FakeOpenAI(respond=respond) as server:
        server.script(text("not JSON at all"))  # the first segment's reply: repaired
        report = bench_llm(
            settings_for(server, tmp_path),
            data,
            None,
            None,
            50,
            10,
            (),
            (None, None),
            out,
            lines.append,
        )
        calls = [b["messages"][0]["content"] for b in server.requests]

    outcomes = [s.outcome for s in report.segments]
    assert outcomes[0] == "after repair" and set(outcomes[1:]) <= {"first try"}
    assert all(s.records == 1 and s.output_tokens > 0 for s in report.segments)
    assert calls.count(SYSTEM_PROMPT) == len(report.segments) + 1  # one repair
    # every graded question has its evidence encoded (50 segments hold the whole file)
    assert [q.category for q in report.questions] == [
        "single-hop",
        "temporal",
        "multi-hop",
        "open-domain",
    ]
    assert report.skipped_questions == 1  # the one without evidence
    assert [q.plan_source for q in report.questions] == ["llm", "heuristic", "llm", "llm"]
    assert all(q.answer == ANSWER for q in report.questions)
    assert [q.correct for q in report.questions] == [True, False, False, False]
    assert report.judge == "fake-llm"
    summary = json.loads(out.read_text())["summary"]
    assert summary["planner_fallbacks"] == 1
    assert summary["outcomes"]["after repair"] == 1 and summary["outcomes"]["dead-lettered"] == 0
    assert summary["accuracy"]["all"] == {"accuracy": 0.25, "correct": 1, "n": 4}
    assert summary["accuracy"]["single-hop"]["correct"] == 1
    printed = "\n".join(lines)
    assert "segment 1/" in printed and "after repair" in printed
    assert "judge: CORRECT (running 1/1)" in printed
    assert "judge fake-llm: sanity check 16/16, passed" in printed
    assert (
        "accuracy (judge fake-llm, LoCoMo protocol, sanity check 16/16 passed): all 0.250 (1/4)"
        in printed
    )
    assert summary["judge_check"]["passed"] and summary["failed_answers"] == []


def run_tiny(server: FakeOpenAI, tmp_path: Path, lines: list[str], **llm: Any) -> Any:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    settings = settings_for(server, tmp_path, **llm)
    return bench_llm(settings, data, None, None, 50, 10, (), (None, None), None, lines.append)


def test_bench_llm_in_a_small_context_window_sends_no_call_the_server_refuses(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    with FakeOpenAI(respond=respond) as server:
        server.context_tokens = 2600  # less than the planner's prompt and its reply cap
        report = run_tiny(server, tmp_path, lines)
        systems = [b["messages"][0]["content"] for b in server.requests]
        caps = [b["max_completion_tokens"] for b in server.requests]
    assert server.oversized == []
    for system in (SYSTEM_PROMPT, PLANNER_SYSTEM_PROMPT, ANSWER_SYSTEM_PROMPT, LOCOMO_JUDGE_SYSTEM):
        assert system in systems
    planner_caps = [c for c, sys in zip(caps, systems, strict=True) if sys == PLANNER_SYSTEM_PROMPT]
    assert planner_caps and max(planner_caps) < 2048  # the planner's cap, cut to fit
    assert all(q.answer == ANSWER and q.failure is None for q in report.questions)


def test_bench_llm_failed_answer_is_wrong_listed_apart_and_never_judged(tmp_path: Path) -> None:
    refusal = {"error": {"message": "request (9000 tokens) exceeds the available context size"}}

    def refusing(body: dict[str, Any]) -> Action:
        question = body["messages"][-1]["content"].split("Question: ")[-1]
        if body["messages"][0]["content"] == ANSWER_SYSTEM_PROMPT and "train" in question:
            return status(400, {}, refusal)
        return respond(body)

    lines: list[str] = []
    with FakeOpenAI(respond=refusing) as server:
        report = run_tiny(server, tmp_path, lines)
        judged = [
            graded(b["messages"][-1]["content"])
            for b in server.requests
            if "Generated" in str(b["messages"])
        ]
    failed = [q for q in report.questions if q.failure]
    assert len(failed) == 1 and "HTTP 400" in (failed[0].failure or "")
    assert failed[0].judged and failed[0].correct is False and failed[0].answer == ""
    assert all(question != failed[0].question for question, _, _ in judged)
    printed = "\n".join(lines)
    assert "failed answers (wrong, never judged): 1" in printed
    assert "-> failed: the LLM server refused the request: HTTP 400" in printed
    assert "failed answers: 1" in printed and "all 0.250 (1/4)" in printed


def test_bench_llm_judge_that_fails_its_sanity_check_reports_no_accuracy(tmp_path: Path) -> None:
    def lenient(body: dict[str, Any]) -> Action:
        if body["messages"][0]["content"] == LOCOMO_JUDGE_SYSTEM:
            return valid({"reasoning": "about the same thing", "label": "CORRECT"})
        return respond(body)

    lines: list[str] = []
    with FakeOpenAI(respond=lenient) as server:
        report = run_tiny(server, tmp_path, lines)
        judge_calls = sum(1 for b in server.requests if "Generated answer" in str(b["messages"]))
    check = report.judge_check
    assert check is not None and not check["passed"]
    missed = {m["name"] for m in check["missed"]}
    assert {"empty answer", "error: refused", "copies the question"} <= missed
    assert judge_calls == check["pairs"]  # the questions were not judged
    assert not any(q.judged for q in report.questions)
    printed = "\n".join(lines)
    assert "judge fake-llm: sanity check 5/16, FAILED: another name (judged CORRECT)" in printed
    assert "accuracy: none: the judge fake-llm failed its sanity check on 11 of 16 pairs" in printed


def test_bench_llm_segment_stays_invalid_or_llm_down_is_counted_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    with FakeOpenAI(respond=respond) as server:
        server.script(text("nope"), text("still nope"), status(503, {}))
        report = bench_llm(
            settings_for(server, tmp_path, max_attempts=1),
            data,
            "locomo",
            "tiny",
            3,
            0,
            (),
            (None, None),
            None,
            lambda _: None,
        )
    assert [s.outcome for s in report.segments] == ["dead-lettered", "unavailable", "first try"]
    assert report.segments[0].error and "HTTP 503" in (report.segments[1].error or "")
    assert report.questions == []


def test_bench_llm_jsonl_with_asked_questions_answers_without_a_judge(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[3] / "deploy" / "demo" / "conversation.jsonl"
    lines: list[str] = []
    with FakeOpenAI(respond=respond) as server:
        report = bench_llm(
            settings_for(server, tmp_path),
            data,
            None,
            None,
            1,
            5,
            ("What did Priya sign them up for?",),
            (None, None),
            None,
            lines.append,
        )
    (q,) = report.questions
    assert q.answer == ANSWER and q.gold is None and not q.judged and report.judge is None
    assert len(report.segments) == 1
    assert "accuracy" not in "\n".join(lines[-2:])


def test_bench_llm_without_an_llm_or_with_an_unknown_conversation_says_why(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    write_locomo(data)
    bare = Settings.load(None)
    with pytest.raises(BenchError, match="LYCHEE_LLM_BASE_URL"):
        bench_llm(bare, data, None, None, 1, 1, (), (None, None), None, print)
    with FakeOpenAI(respond=respond) as server, pytest.raises(BenchError, match="'nope'.*tiny"):
        bench_llm(
            settings_for(server, tmp_path),
            data,
            None,
            "nope",
            1,
            1,
            (),
            (None, None),
            None,
            print,
        )


def test_bench_llm_redacted_question_line_holds_no_text_of_the_data() -> None:
    from streams.bench.llm_report import QuestionResult, question_line

    q = QuestionResult(
        "Where is the cabin?",
        "single-hop",
        "By the lake",
        "near a lake",
        "llm",
        12.0,
        300,
        judged=True,
        correct=True,
    )
    line = question_line(1, 1, q, [q], redact=True)
    assert "cabin" not in line and "lake" not in line
    assert "[single-hop] (texts withheld)" in line and "judge: CORRECT (running 1/1)" in line


@pytest.mark.parametrize(
    ("judge", "code"), [(judged, 0), (lambda _: valid({"label": "CORRECT"}), 1)]
)
def test_bench_judge_command_grades_the_sanity_pairs_and_fails_a_lenient_judge(
    judge: Any, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from streams.cli import main

    with FakeOpenAI(respond=lambda body: judge(body["messages"][-1]["content"])) as server:
        monkeypatch.setenv("LYCHEE_LLM_BASE_URL", server.url)
        monkeypatch.setenv("LYCHEE_LLM_MODEL", "fake-llm")
        out = CliRunner().invoke(main, ["bench", "judge"])
    assert out.exit_code == code, out.output
    last = out.output.strip().splitlines()[-1]
    if code == 0:
        assert last == "judge fake-llm: sanity check 16/16, passed"
    else:
        assert last.startswith("judge fake-llm: sanity check 5/16, FAILED: another name")
        assert "missed: empty answer: wants WRONG" in out.output
