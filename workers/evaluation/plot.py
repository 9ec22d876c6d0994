"""Recall against evidence budget, one line per system: the benchmark's headline picture.

Drawn with matplotlib's Agg canvas directly (no pyplot), so it works headless and
leaves no global figure state behind in a long-running process.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from workers.evaluation.report import LocomoReport

_HIGHLIGHT = "lychee"


def plot_recall_vs_budget(report: LocomoReport, path: str | Path) -> Path:
    """Write a 150-dpi PNG of recall@budget ("all" questions) per system; returns the path."""
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    budgets: list[int] = []
    for name, system in report.systems.items():
        row = system.recall_at_budget["all"]
        xs = sorted(int(b) for b in row)
        ys = [row[str(b)] for b in xs]
        budgets = sorted(set(budgets) | set(xs))
        main = name == _HIGHLIGHT
        (line,) = ax.plot(
            xs,
            ys,
            marker="o",
            linewidth=2.6 if main else 1.6,
            markersize=7 if main else 5,
            label=name,
            zorder=3 if main else 2,
        )
        ax.annotate(
            f"{ys[-1]:.2f}",
            (xs[-1], ys[-1]),
            textcoords="offset points",
            xytext=(6, 0),
            va="center",
            fontsize=8,
            color=line.get_color(),
        )
    ax.set_xticks(budgets)
    if budgets:
        pad = (budgets[-1] - budgets[0]) * 0.08 or 50
        ax.set_xlim(budgets[0] - pad, budgets[-1] + pad * 2)
    ax.set_ylim(0, 1)
    ax.set_xlabel("evidence budget (o200k_base tokens)")
    ax.set_ylabel("evidence recall@budget (all questions)")
    ax.set_title(f"Recall vs budget: {Path(report.data).name} ({report.variant})")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", title="system")
    out = Path(path)
    fig.savefig(out, dpi=150, format="png")
    return out
