"""`lychee bench locomo` end to end on a file written here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.bench.errors import BenchError
from streams.bench.judging import judge_target
from streams.bench.locomo import run_locomo
from streams.settings import Settings
from streams.stack.embedded import Stack
from streams.stack.ready import launch, wait_ready
from tests.evals.compare import load, paired
from tests.fakes.openai_server import Action, FakeOpenAI, valid
from tests.streams.bench.files import OVERSIZED, typed, write_locomo
from tests.streams.bench.test_llm import is_sanity_pair, respond
from workers.evaluation.judge import LOCOMO_JUDGE_SYSTEM
from workers.evaluation.plot import plot_recall_vs_budget
from workers.evaluation.report import format_table, validate_report
from workers.query.answer import ANSWER_SYSTEM_PROMPT

pytestmark = pytest.mark.integration


def test_bench_locomo_end_to_end_report_matches_the_schema(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "tiny.json"
    write_locomo(data, typed(), oversized=True)  # a turn the contract refuses: named, the rest runs
    dump = tmp_path / "replies.json"
    report = run_locomo(settings, data, progress=False, also=("no-entity-topic-nodes",), dump=dump)
    assert validate_report(report.to_json_dict()) == report
    # every question's reply under the file's own namespace, so two runs pair
    rows = load(dump)
    assert [(r["namespace"], r["category"]) for r in rows][:1] == [("tiny", "single-hop")]
    assert len(rows) == 5 and all(r["items"] for r in rows)
    assert len(paired(rows, rows)) == 4  # the question without evidence is not scored
    assert report.conversations == 1 and report.turns == 16
    [skipped] = report.to_json_dict()["skipped"]
    assert skipped["turn_id"] == OVERSIZED and skipped["session_id"] == "session_1"
    assert skipped["reason"] == "content: 200,001 characters, at most 200,000"
    assert report.questions == 5  # category 5 dropped; the empty-evidence one is asked...
    assert report.counts is not None and report.counts["all"] == 4  # ...and left out of recall
    assert set(report.systems) == {
        "lychee",
        "lychee:no-entity-topic-nodes",
        "dense",
        "bm25",
        "hybrid",
    }
    for system in report.systems.values():
        for cat, row in system.recall_at_k.items():
            assert set(row) == {"5", "10", "15"} and all(0.0 <= v <= 1.0 for v in row.values()), cat
    # 16 short turns fit into 2000 tokens: every system finds all the evidence there
    for name in ("lychee", "dense", "hybrid"):  # BM25 ranks only turns that share a word
        assert report.systems[name].recall_at_budget["all"]["2000"] == 1.0, name
    # typed questions: every system per type and by statement pair, printed side by side
    for name, system in report.systems.items():
        assert system.by_kind is not None and system.pairs is not None, name
        assert system.by_kind.counts == {"conflict": 1, "lookup": 2, "update": 1}, name
        assert set(system.by_kind.hit_at_k["update"]) == {"5", "10", "15"}, name
        assert {c: (p.of, p.k) for c, p in system.pairs.items()} == {
            "newer_first": (1, 10),
            "both_covered": (1, 10),
        }, name
    table = format_table(report)
    assert "recall@10 by question type" in table and "hit@10 by question type" in table
    assert "contradictions, both statements in the top 10: lychee " in table
    assert report.construction.segments >= 2 and report.construction.turns_per_segment > 1
    assert report.ingest.exchanges == 16
    assert "accuracy: n/a" in table
    png = plot_recall_vs_budget(report, tmp_path / "recall.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_locomo_worker_variant_on_a_configured_stack_is_refused(
    settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "tiny.json"
    write_locomo(data)
    with pytest.raises(BenchError, match="LYCHEE_SEGMENTER__MODE=eager"):
        run_locomo(settings, data, variant="eager", progress=False)
    for name in ("eager", "full"):
        with pytest.raises(BenchError, match=f"--also takes per-request ablations only.*{name}"):
            run_locomo(settings, data, also=(name,), progress=False)
    with pytest.raises(BenchError, match="no conversation"):
        run_locomo(settings, data, conversation_ids=["nope"], progress=False)


@pytest.fixture(scope="module")
def llm_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeOpenAI, Settings]]:
    """One embedded stack whose workers call a fake LLM (the encoder, the planner and the
    answerer) and client settings that name it too (the judge), for the answer tests: each
    test sets how the fake answers and reads only the requests of its own run."""
    with FakeOpenAI(respond=respond) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("LYCHEE_LLM_BASE_URL", server.url)
        env.setenv("LYCHEE_LLM_MODEL", "fake-llm")
        env.delenv("LYCHEE_KAFKA_BOOTSTRAP", raising=False)
        # a loaded machine's fake can answer after the planner's 5 s, which then plans
        # without it: the tests count the plans
        env.setenv("LYCHEE_QUERY_PLAN_TIMEOUT_S", "120")
        stack = Stack(tmp_path_factory.mktemp("llm-stack"))
        try:
            settings = launch(stack)
            asyncio.run(wait_ready(stack, settings, timeout_s=300))
            yield server, settings
        finally:
            stack.stop()


def test_bench_locomo_answer_generates_answers_in_the_stack_and_judges_them(
    tmp_path: Path, llm_stack: tuple[FakeOpenAI, Settings]
) -> None:
    server, s = llm_stack
    server.respond = respond
    data = tmp_path / "tiny.json"
    write_locomo(data)
    before = len(server.requests)
    report = run_locomo(s, data, progress=False, judge=judge_target(s, None, None))
    judged = [b for b in server.requests[before:] if "Generated answer: " in str(b["messages"])]
    answered = [b for b in judged if not is_sanity_pair(b)]
    assert report.judge == "fake-llm" and report.llm == "fake-llm"
    accuracy = report.systems["lychee"].accuracy
    assert accuracy is not None
    # five questions asked, all answered "San Marzano and cherry tomatoes": only the first
    # gold answer matches (the judge here labels by the gold's first word)
    assert len(answered) == 5
    assert accuracy["all"] == 0.2 and accuracy["single-hop"] == 0.5
    assert accuracy["temporal"] == accuracy["multi-hop"] == accuracy["open-domain"] == 0.0
    assert report.systems["dense"].accuracy is None
    assert report.systems["dense"].by_kind is None and report.systems["dense"].pairs is None
    table = format_table(report)
    assert (
        "accuracy lychee (judge fake-llm, LoCoMo protocol, sanity check 16/16 passed): all 0.200"
        in table
    )
    assert report.judge_check is not None and report.judge_check["passed"]
    assert len(judged) - len(answered) == report.judge_check["pairs"]
    assert report.query.llm_calls_per_question == 2  # a plan and an answer each


def test_bench_locomo_answer_with_a_judge_that_fails_its_check_reports_no_accuracy(
    tmp_path: Path, llm_stack: tuple[FakeOpenAI, Settings]
) -> None:
    def lenient(body: dict[str, Any]) -> Action:
        if body["messages"][0]["content"] == LOCOMO_JUDGE_SYSTEM:
            return valid({"reasoning": "about the same thing", "label": "CORRECT"})
        return respond(body)

    server, s = llm_stack
    server.respond = lenient
    data = tmp_path / "tiny.json"
    write_locomo(data)
    before = len(server.requests)
    report = run_locomo(s, data, progress=False, judge=judge_target(s, None, None))
    systems = [b["messages"][0]["content"] for b in server.requests[before:]]
    assert report.systems["lychee"].accuracy is None
    assert report.judge_check is not None and not report.judge_check["passed"]
    assert ANSWER_SYSTEM_PROMPT not in systems  # no answers generated for a judge not trusted
    assert systems.count(LOCOMO_JUDGE_SYSTEM) == report.judge_check["pairs"]
    assert any(n.startswith("no accuracy: the judge failed its sanity check") for n in report.notes)
    table = format_table(report)
    assert "judge fake-llm FAILED its sanity check on: another name;" in table


def test_bench_locomo_answer_without_an_llm_is_refused_with_the_reason(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from streams.cli import main

    data = tmp_path / "tiny.json"
    write_locomo(data)
    env = {"LYCHEE_LLM_BASE_URL": "", "LYCHEE_LLM_MODEL": "", "LYCHEE_KAFKA_BOOTSTRAP": "x:1"}
    out = CliRunner().invoke(main, ["bench", "locomo", "--data", str(data), "--answer"], env=env)
    assert out.exit_code != 0 and "--answer needs an LLM" in out.output
