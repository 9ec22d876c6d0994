"""`python -m tests.evals.side_by_side --base REV --head REV -- lychee bench locomo ...`:
two commits' benchmark runs on one machine, alternated, with medians and ratios.

A machine's speed drifts over minutes (other processes, caches, heat), so one run of each
commit tells little. Each commit is checked out once into a temporary git worktree (removed
at the end), and the command runs for them in the order base, head, head, base, base, head,
... (each pair one run of each, the pairs' order alternating), so a drift weighs on both
sides alike. A run happens inside its commit's worktree with `PYTHONPATH` there and this
process's environment otherwise: the interpreter and libraries are this repository's venv
(a bare `lychee` is this venv's), only the project's code differs. Arguments naming existing
paths (relative to here) are made absolute first, and each run's `--out` is replaced by a
file of its own, kept in `--reports`. From each report this prints ingest exchanges/s, the
query service's p95 under the benchmark's load, the client's round-trip p95, R@10, R@1000
tokens and hit@10 of `lychee`: per run, per pair with its ratio head/base, and as medians
of each side with their ratio and the median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.bench.errors import BenchError
from workers.evaluation.report import validate_report

SYSTEM = "lychee"
_CLIENT = re.compile(r"client round trip p50/p95: (\{[^}]*\})")


class SideBySideError(BenchError):
    """A run failed or its report lacks a figure the comparison reads."""


@dataclass(frozen=True)
class Figures:
    """What one run measured; `hit_at_10` and `client_p95_ms` are None when its report
    predates them."""

    ingest_eps: float
    service_p95_ms: float
    client_p95_ms: float | None
    recall_at_10: float
    recall_at_1000_tokens: float
    hit_at_10: float | None


@dataclass(frozen=True)
class Metric:
    """One column: its name, how it reads off `Figures`, and the format of its cells."""

    name: str
    read: Callable[[Figures], float | None]
    fmt: str


METRICS = (
    Metric("ingest ex/s", lambda f: f.ingest_eps, "{:.2f}"),
    Metric("service p95 ms", lambda f: f.service_p95_ms, "{:.0f}"),
    Metric("client p95 ms", lambda f: f.client_p95_ms, "{:.0f}"),
    Metric("R@10", lambda f: f.recall_at_10, "{:.3f}"),
    Metric("R@1000tok", lambda f: f.recall_at_1000_tokens, "{:.3f}"),
    Metric("hit@10", lambda f: f.hit_at_10, "{:.3f}"),
)


def figures_of(data: dict[str, Any]) -> Figures:
    """The figures of a `lychee bench locomo` report (its JSON form)."""
    report = validate_report(data)
    if SYSTEM not in report.systems:
        raise SideBySideError(f"the report has no {SYSTEM!r} system")
    system = report.systems[SYSTEM]
    hit = system.hit_at_k.get("all", {}).get("10") if system.hit_at_k else None
    try:
        recall = system.recall_at_k["all"]["10"]
        budget = system.recall_at_budget["all"]["1000"]
    except KeyError as exc:
        raise SideBySideError(f"the report lacks {SYSTEM}'s figure {exc}") from exc
    return Figures(
        ingest_eps=report.ingest.exchanges_per_second,
        service_p95_ms=system.latency_ms.p95,
        client_p95_ms=_client_p95(report.notes),
        recall_at_10=recall,
        recall_at_1000_tokens=budget,
        hit_at_10=hit,
    )


def _client_p95(notes: list[str]) -> float | None:
    """The client's round-trip p95, which the report carries in a note."""
    for note in notes:
        if found := _CLIENT.search(note):
            value = ast.literal_eval(found.group(1)).get("p95")
            return None if value is None else float(value)
    return None


def ratio(head: float | None, base: float | None) -> float | None:
    return None if head is None or base is None or base == 0 else head / base


def median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def order(pairs: int) -> list[tuple[int, str]]:
    """(pair, side) in run order: base, head, then head, base, then base, head, ..."""
    runs: list[tuple[int, str]] = []
    for p in range(pairs):
        sides = ("base", "head") if p % 2 == 0 else ("head", "base")
        runs += [(p, side) for side in sides]
    return runs


def with_out(command: list[str], out: Path) -> list[str]:
    """`command` writing its report to `out`: its `--out` value replaced, or one added."""
    cmd = list(command)
    for i, arg in enumerate(cmd):
        if arg == "--out" and i + 1 < len(cmd):
            cmd[i + 1] = str(out)
            return cmd
        if arg.startswith("--out="):
            cmd[i] = f"--out={out}"
            return cmd
    return [*cmd, "--out", str(out)]


def resolve(command: list[str]) -> list[str]:
    """A bare `lychee` is this venv's entry point, whatever PATH says."""
    local = Path(sys.executable).parent / command[0]
    if command[0] == "lychee" and local.exists():
        return [str(local), *command[1:]]
    return command


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SideBySideError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def worktrees(repo: Path, revs: dict[str, str], root: Path) -> Iterator[dict[str, Path]]:
    """Each side's commit checked out (detached) under `root`; removed on the way out."""
    made: dict[str, Path] = {}
    try:
        for side, rev in revs.items():
            path = root / side
            git(repo, "worktree", "add", "--detach", str(path), rev)
            made[side] = path
        yield made
    finally:
        for path in made.values():
            git(repo, "worktree", "remove", "--force", str(path))


def anchored(command: list[str], cwd: Path) -> list[str]:
    """`command` with each argument that names an existing path under `cwd` made absolute:
    the command runs inside the worktree, where `../shared/...` would name something else."""
    out = []
    for arg in command:
        path = cwd / arg
        if arg and not arg.startswith("-") and not Path(arg).is_absolute() and path.exists():
            arg = str(path.resolve())
        out.append(arg)
    return out


def run_once(command: list[str], tree: Path, out: Path) -> Figures:
    """One run of `command` with the project's code from `tree`; its report's figures.

    It runs inside `tree` with `PYTHONPATH` there too: the stack starts its workers as
    `python -m streams.cli`, which puts the current directory first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH")) if p)
    done = subprocess.run(with_out(anchored(command, Path.cwd()), out), env=env, cwd=tree)
    if done.returncode != 0:
        raise SideBySideError(f"{tree.name}: the command exited with {done.returncode}")
    try:
        return figures_of(json.loads(out.read_text()))
    except (OSError, ValueError) as exc:
        raise SideBySideError(f"{tree.name}: cannot read its report {out}: {exc}") from exc


def _cells(f: Figures | None, metric: Metric, as_ratio: bool = False) -> str:
    value = None if f is None else metric.read(f)
    return "n/a" if value is None else ("x{:.2f}" if as_ratio else metric.fmt).format(value)


def table(runs: list[tuple[int, str, str, Figures]]) -> list[str]:
    """Every run, then per pair head/base, then the medians of each side and their ratio."""
    header = ["", *(m.name for m in METRICS)]
    rows: list[list[str]] = []
    for p, side, rev, f in runs:
        rows.append([f"pair {p + 1} {side} {rev[:7]}", *(_cells(f, m) for m in METRICS)])
    by_pair: dict[int, dict[str, Figures]] = {}
    for p, side, _, f in runs:
        by_pair.setdefault(p, {})[side] = f
    ratios: dict[str, list[float | None]] = {m.name: [] for m in METRICS}
    for p, sides in sorted(by_pair.items()):
        if {"base", "head"} <= set(sides):
            cells = []
            for m in METRICS:
                r = ratio(m.read(sides["head"]), m.read(sides["base"]))
                ratios[m.name].append(r)
                cells.append("n/a" if r is None else f"x{r:.2f}")
            rows.append([f"pair {p + 1} head/base", *cells])
    for side in ("base", "head"):
        meds = [median([m.read(f) for _, s, _, f in runs if s == side]) for m in METRICS]
        rows.append(
            [
                f"median {side}",
                *(
                    "n/a" if v is None else m.fmt.format(v)
                    for m, v in zip(METRICS, meds, strict=True)
                ),
            ]
        )
    cells = []
    for m in METRICS:
        r = ratio(
            median([m.read(f) for _, s, _, f in runs if s == "head"]),
            median([m.read(f) for _, s, _, f in runs if s == "base"]),
        )
        cells.append("n/a" if r is None else f"x{r:.2f}")
    rows.append(["median head/median base", *cells])
    rows.append(
        [
            "median of pair ratios",
            *("n/a" if (v := median(ratios[m.name])) is None else f"x{v:.2f}" for m in METRICS),
        ]
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]


def side_by_side(
    repo: Path, base: str, head: str, pairs: int, command: list[str], reports: Path
) -> list[tuple[int, str, str, Figures]]:
    """Run `command` for both commits, alternated; (pair, side, commit, figures) in run order."""
    revs = {
        "base": git(repo, "rev-parse", f"{base}^{{commit}}"),
        "head": git(repo, "rev-parse", f"{head}^{{commit}}"),
    }
    reports = reports.resolve()  # the runs happen inside the worktrees
    reports.mkdir(parents=True, exist_ok=True)
    done: list[tuple[int, str, str, Figures]] = []
    with (
        tempfile.TemporaryDirectory(prefix="lychee-side-by-side-") as tmp,
        worktrees(repo, revs, Path(tmp)) as trees,
    ):
        for n, (p, side) in enumerate(order(pairs), start=1):
            out = reports / f"run{n}-pair{p + 1}-{side}-{revs[side][:7]}.json"
            print(
                f"# run {n}: pair {p + 1}, {side} {revs[side][:7]} -> {out}",
                file=sys.stderr,
                flush=True,
            )
            done.append((p, side, revs[side], run_once(command, trees[side], out)))
    return done


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit measured against")
    parser.add_argument("--head", default="HEAD", help="the commit measured (committed state)")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each commit (>= 1)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the git repository")
    parser.add_argument(
        "--reports",
        type=Path,
        default=None,
        help="where each run's report stays (default: a new temporary directory)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the benchmark command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the benchmark command after --")
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    reports = args.reports or Path(tempfile.mkdtemp(prefix="lychee-side-by-side-reports-"))
    try:
        runs = side_by_side(args.repo, args.base, args.head, args.pairs, resolve(command), reports)
    except SideBySideError as exc:
        parser.exit(1, f"side_by_side: {exc}\n")
    revs = {side: rev[:7] for _, side, rev, _ in runs}
    print(f"$ {' '.join(command)}")
    print(f"base {revs['base']}, head {revs['head']}, {args.pairs} pairs; reports in {reports}")
    for line in table(runs):
        print(line)


if __name__ == "__main__":
    main()
