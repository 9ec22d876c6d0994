"""`tests.evals.side_by_side`: figures read off invented reports, medians and ratios, and the
run loop over two commits of a scratch repository with a command that writes a report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.evals.side_by_side import (
    METRICS,
    Figures,
    SideBySideError,
    figures_of,
    main,
    median,
    order,
    ratio,
    side_by_side,
    table,
    with_out,
)
from workers.evaluation.metrics import CATEGORY_ORDER


def report(
    eps: float, p95: float, client: float | None, r10: float, hit: bool = True
) -> dict[str, Any]:
    """A LoCoMo report with the given figures of `lychee` (every category alike)."""
    rows = {c: {"10": r10} for c in CATEGORY_ORDER}
    system = {
        "recall_at_k": rows,
        "recall_at_budget": {c: {"1000": r10 + 0.05} for c in CATEGORY_ORDER},
        "latency_ms": {"p50": p95 / 2, "p95": p95},
        "accuracy": None,
        **({"hit_at_k": {c: {"10": r10 + 0.1} for c in CATEGORY_ORDER}} if hit else {}),
    }
    notes = ["no LLM configured"]
    if client is not None:
        notes.append(
            "lychee latency is the query service's retrieval time; client round trip "
            f"p50/p95: {{'p50': {client / 2}, 'p95': {client}}}"
        )
    return {
        "schema": "lychee.bench.locomo/1",
        "data": "x.json",
        "variant": "full",
        "llm": None,
        "embedding": "all-MiniLM-L6-v2",
        "conversations": 1,
        "turns": 4,
        "questions": 2,
        "systems": {"lychee": system},
        "construction": {
            "segments": 1,
            "encoder_calls": 1,
            "turns_per_segment": 4.0,
            "llm_input_tokens": 0,
            "llm_output_tokens": 0,
            "prompt_tokens_estimate": 0,
            "eager_prompt_tokens_estimate": 0,
        },
        "query": {"llm_calls_per_question": 0.0, "llm_tokens_per_question": 0.0},
        "ingest": {
            "exchanges": 4,
            "seconds": 4 / eps,
            "exchanges_per_second": eps,
            "searchable_lag_ms": {"p50": 1.0, "p95": 2.0},
        },
        "notes": notes,
    }


def test_figures_of_reads_lychee_and_the_client_note() -> None:
    f = figures_of(report(20.0, 800.0, 1500.0, 0.8))
    assert f == Figures(20.0, 800.0, 1500.0, 0.8, pytest.approx(0.85), pytest.approx(0.9))  # type: ignore[arg-type]


def test_figures_of_an_older_report_leaves_missing_figures_none() -> None:
    f = figures_of(report(20.0, 800.0, None, 0.8, hit=False))
    assert f.client_p95_ms is None and f.hit_at_10 is None and f.recall_at_10 == 0.8


def test_figures_of_a_report_without_lychee_is_refused() -> None:
    data = report(20.0, 800.0, None, 0.8)
    data["systems"] = {"dense": data["systems"]["lychee"]}
    with pytest.raises(SideBySideError, match="no 'lychee' system"):
        figures_of(data)


def test_median_and_ratio_skip_what_is_unknown() -> None:
    assert median([3.0, None, 1.0, 2.0]) == 2.0 and median([None]) is None
    assert ratio(3.0, 2.0) == 1.5 and ratio(None, 2.0) is None and ratio(1.0, 0.0) is None


def test_order_alternates_base_head_then_head_base() -> None:
    assert [s for _, s in order(3)] == ["base", "head", "head", "base", "base", "head"]
    assert [p for p, _ in order(2)] == [0, 0, 1, 1]


def test_with_out_replaces_or_adds_the_report_path(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert with_out(["b", "--out", "report.json", "-v"], out) == ["b", "--out", str(out), "-v"]
    assert with_out(["b", "--out=report.json"], out) == ["b", f"--out={out}"]
    assert with_out(["b"], out) == ["b", "--out", str(out)]


def test_table_gives_pair_ratios_and_medians() -> None:
    base1, head1 = (
        figures_of(report(10.0, 800.0, 1000.0, 0.8)),
        figures_of(report(20.0, 400.0, 900.0, 0.8)),
    )
    head2, base2 = (
        figures_of(report(30.0, 300.0, 800.0, 0.8)),
        figures_of(report(10.0, 600.0, None, 0.8)),
    )
    runs = [(0, "base", "a" * 40, base1), (0, "head", "b" * 40, head1)]
    runs += [(1, "head", "b" * 40, head2), (1, "base", "a" * 40, base2)]
    lines = {line.split("  ")[0]: line.split() for line in table(runs)}
    ingest = [m.name for m in METRICS].index("ingest ex/s")
    width = len(METRICS)
    assert lines["pair 1 head/base"][-width:][:3] == ["x2.00", "x0.50", "x0.90"]
    assert lines["pair 2 head/base"][-width:][:3] == ["x3.00", "x0.50", "n/a"]
    assert lines["median base"][-width:][ingest] == "10.00"
    assert lines["median head"][-width:][:3] == ["25.00", "350", "850"]
    assert lines["median head/median base"][-width:][:3] == ["x2.50", "x0.50", "x0.85"]
    assert lines["median of pair ratios"][-width:][:3] == ["x2.50", "x0.50", "x0.90"]


# a benchmark stand-in: its figures come from the checkout it runs in, found by PYTHONPATH
FAKE = """
import json, os, sys
from pathlib import Path
from tests.evals.test_side_by_side import report
tree = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])
assert Path.cwd().resolve() == tree.resolve(), (Path.cwd(), tree)
speed = float((tree / "speed.txt").read_text())
data = json.loads(Path(sys.argv[sys.argv.index("--data") + 1]).read_text())
with open(sys.argv[-1], "w") as f:
    json.dump(report(speed * data["scale"], 1000.0 / speed, 2000.0 / speed, 0.8), f)
with open(os.environ["RUN_LOG"], "a") as f:
    f.write(f"{speed}\\n")
"""


def scratch_repo(root: Path) -> tuple[Path, str, str]:
    """A git repository of two commits whose `speed.txt` reads 10, then 20."""
    repo = root / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    revs = []
    for speed in ("10", "20"):
        (repo / "speed.txt").write_text(speed)
        git("add", "speed.txt")
        git("commit", "-q", "-m", speed)
        revs.append(git("rev-parse", "HEAD"))
    return repo, revs[0], revs[1]


def fake_command(tmp_path: Path) -> list[str]:
    (tmp_path / "data.json").write_text(json.dumps({"scale": 2.0}))
    # the stand-in imports this test module: the project on its path beside the checkout's
    project = Path(__file__).resolve().parents[2]
    prelude = f"import sys; sys.path.insert(1, {str(project)!r})\n"
    return [sys.executable, "-c", prelude + FAKE, "--data", "data.json", "--out", "report.json"]


def test_side_by_side_runs_each_commit_in_its_checkout_alternated_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(tmp_path)  # `data.json` is relative to here, not to the checkouts
    monkeypatch.setenv("RUN_LOG", str(tmp_path / "runs.log"))
    runs = side_by_side(repo, base, "HEAD", 2, fake_command(tmp_path), tmp_path / "reports")
    assert (tmp_path / "runs.log").read_text().split() == ["10.0", "20.0", "20.0", "10.0"]
    assert [(p, s, r) for p, s, r, _ in runs] == [
        (0, "base", base),
        (0, "head", head),
        (1, "head", head),
        (1, "base", base),
    ]
    assert [f.ingest_eps for *_, f in runs] == [20.0, 40.0, 40.0, 20.0]
    assert len(list((tmp_path / "reports").glob("run*-pair*.json"))) == 4
    worktrees = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(worktrees) == 1  # the temporary checkouts are gone


def test_side_by_side_a_failing_run_is_named_and_the_checkouts_removed(tmp_path: Path) -> None:
    repo, base, head = scratch_repo(tmp_path)
    with pytest.raises(SideBySideError, match="base: the command exited with 3"):
        side_by_side(repo, base, head, 1, [sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(listed) == 1


def test_main_prints_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUN_LOG", str(tmp_path / "runs.log"))
    argv = ["--base", base[:7], "--head", head, "--repo", str(repo), "--pairs", "1"]
    main([*argv, "--reports", "r", "--", *fake_command(tmp_path)])  # relative to here
    out = capsys.readouterr().out
    assert f"base {base[:7]}, head {head[:7]}, 1 pairs" in out
    ratios = next(line for line in out.splitlines() if line.startswith("pair 1 head/base"))
    assert ratios.split()[3:6] == ["x2.00", "x0.50", "x0.50"]
    assert len(list((tmp_path / "r").glob("run*.json"))) == 2
