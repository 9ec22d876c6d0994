"""The probe's raw-turn baselines and figures, on a typed file written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.evals.probe_figures import baselines, figures, summary
from tests.evals.recall_probe import run
from tests.streams.bench.files import typed, write_locomo
from tests.workers.builders import HashEmbedder
from workers.datasets import load_locomo
from workers.evaluation.baselines import render_turn_line
from workers.evaluation.metrics import QuestionResult, RankedItem


def test_the_baselines_answer_the_probes_questions_over_rendered_turns(tmp_path: Path) -> None:
    data = tmp_path / "typed.json"
    write_locomo(data, typed())
    [conv] = load_locomo(data)
    embedder = HashEmbedder()
    ranked = baselines([conv], embedder, k=3)
    lines = [
        render_turn_line(ex.session_date, t.speaker, t.content, t.image_caption)
        for ex in conv.exchanges
        for t in ex.turns
    ]
    # the dense baseline ranks the embedder's own vectors of each rendered turn
    assert embedder.calls[0] == lines and lines[0].startswith("[2 June 2024] Mara: I finally")
    questions = [q.question for q in conv.qa if q.category != 5]
    assert embedder.calls[1] == questions
    vecs, qvec = embedder.embed(lines), embedder.embed(questions[:1])[0]
    top = [f"D{1 + i // 8}:{1 + i % 8}" for i in np.argsort(-(vecs @ qvec), kind="stable")[:3]]
    assert [item.turn_ids[0] for item in ranked["dense"][0].items] == top
    assert set(ranked) == {"dense", "hybrid"}
    for results in ranked.values():
        # categories 1-4 in file order, the one without evidence too (recall leaves it out)
        assert [r.category for r in results] == [
            "single-hop",
            "temporal",
            "multi-hop",
            "open-domain",
            "single-hop",
        ]
        assert [r.kind for r in results] == ["lookup", "lookup", "update", "conflict", None]
        assert results[2].sources == {"original_info": ["D1:3"], "updated_info": ["D2:4"]}
        assert all(len(r.items) == 3 for r in results)
    only = baselines([conv], HashEmbedder(), k=3, categories=frozenset({"temporal"}))
    assert [r.kind for r in only["dense"]] == ["lookup"]


def test_figures_count_each_type_and_statement_pair() -> None:
    def result(kind: str, turns: tuple[str, ...], **sources: list[str]) -> QuestionResult:
        items = [RankedItem("w", (t,)) for t in turns]
        return QuestionResult("single-hop", frozenset({"g"}), items, 1.0, kind, sources)

    out = figures(
        [
            result("lookup", ("g",)),
            result("update", ("new", "g", "old"), original_info=["old"], updated_info=["new"]),
            result("update", ("old", "new"), original_info=["old"], updated_info=["new"]),
        ]
    )
    assert out["by_kind"]["counts"] == {"lookup": 1, "update": 2}
    assert out["by_kind"]["hit_at_k"]["update"]["10"] == 0.5
    assert out["pairs"] == {"newer_first": {"n": 1, "of": 2, "k": 10}}


def test_one_probe_run_prints_lychee_and_both_baselines_per_type(tmp_path: Path) -> None:
    data = tmp_path / "typed.json"
    write_locomo(data, typed())
    agg = run(data, tmp_path / "store", None, k=20)
    assert set(agg["baselines"]) == {"dense", "hybrid"}
    for figs in [agg, *agg["baselines"].values()]:
        assert figs["by_kind"]["counts"] == {"conflict": 1, "lookup": 2, "update": 1}
        assert figs["pairs"]["newer_first"]["of"] == figs["pairs"]["both_covered"]["of"] == 1
        assert figs["pairs"]["newer_first"]["n"] in (0, 1)
    lines = summary(agg)
    at = lines.index("hit@10 by question type")
    assert lines[at + 1].split() == ["type", "n", "lychee", "dense", "hybrid"]
    assert [row.split()[:2] for row in lines[at + 2 : at + 5]] == [
        ["conflict", "1"],
        ["lookup", "2"],
        ["update", "1"],
    ]
    pairs = [line for line in lines if " of 1; dense " in line]
    assert [line.split(":")[0] for line in pairs] == [
        "knowledge updates, the newer value in the top 10 above the older",
        "contradictions, both statements in the top 10",
    ]
    assert all(line.endswith(" of 1") and "; hybrid " in line for line in pairs)
    plain = tmp_path / "plain.json"
    write_locomo(plain)  # the same conversation, its questions untyped: the same store serves
    untyped = run(plain, tmp_path / "store", None, k=20, with_baselines=False)
    assert "baselines" not in untyped and untyped["by_kind"]["counts"] == {}
    assert untyped["pairs"] == {} and "question type" not in "\n".join(summary(untyped))
