"""`lychee bench embedder`: the local MiniLM backends against each other, interleaved.

Each round times every backend in turn (order rotated per round) on the same texts: batched at
each batch size, and one text per call. On a shared 2-core machine only figures from one run
compare, so the report gives per-backend medians over rounds and the median of the per-round
ratios to torch. Quality: every backend's vectors against torch's on all texts.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from streams.bench.harness import load_reported
from workers.embedding.base import Embedder
from workers.embedding.local import LocalEmbedder
from workers.embedding.model import PRECISION_OF

BACKENDS = ("torch", *PRECISION_OF)


def sample_texts(data: Path, n: int, seed: int = 0) -> list[str]:
    """`n` turn and exchange texts spread over the whole file, in a seeded random order."""
    texts: list[str] = []
    for conv in load_reported(data)[0]:
        for session in conv.sessions:
            for ex in session.exchanges:
                texts.append(ex.rendered())
                texts += [t.rendered() for t in ex.turns]
    unique = sorted(set(texts))
    random.Random(seed).shuffle(unique)
    return unique[:n]


def make(backend: str, cache_dir: str | None) -> Embedder:
    if backend == "torch":
        return LocalEmbedder()
    from workers.embedding.onnx import OnnxEmbedder

    return OnnxEmbedder(precision=PRECISION_OF[backend], cache_dir=cache_dir)


def run_embedder_bench(
    data: Path,
    backends: tuple[str, ...],
    texts_n: int,
    singles_n: int,
    batch_sizes: tuple[int, ...],
    rounds: int,
    cache_dir: str | None,
) -> dict[str, Any]:
    texts = sample_texts(data, texts_n)
    models = {b: make(b, cache_dir) for b in backends}
    for emb in models.values():
        emb.embed(texts[:8])  # first-call allocations out of the timings
    rates: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
    for r in range(rounds):
        order = list(backends[r % len(backends) :]) + list(backends[: r % len(backends)])
        for b in order:
            emb = models[b]
            for bs in batch_sizes:
                emb.batch_size = bs  # type: ignore[attr-defined]
                t0 = time.perf_counter()
                for i in range(0, len(texts), bs):
                    emb.embed(texts[i : i + bs])
                rates[b].setdefault(f"batch{bs}", []).append(
                    len(texts) / (time.perf_counter() - t0)
                )
            t0 = time.perf_counter()
            for t in texts[:singles_n]:
                emb.embed([t])
            rates[b].setdefault("single", []).append(singles_n / (time.perf_counter() - t0))
    ref = models["torch"].embed(texts) if "torch" in models else None
    quality: dict[str, dict[str, float]] = {}
    for b, emb in models.items():
        if ref is None or b == "torch":
            continue
        got = emb.embed(texts)
        cos = (got * ref).sum(axis=1)
        quality[b] = {
            "max_abs_diff": float(np.abs(got - ref).max()),
            "min_cosine": float(cos.min()),
            "mean_cosine": float(cos.mean()),
        }
    report: dict[str, Any] = {"texts": len(texts), "rounds": rounds, "backends": {}}
    for b in backends:
        row: dict[str, Any] = {"model_name": models[b].model_name}
        for mode, values in rates[b].items():
            row[mode] = {"median_texts_per_s": statistics.median(values)}
            if "torch" in rates and b != "torch":
                ratios = [x / y for x, y in zip(values, rates["torch"][mode], strict=True)]
                row[mode]["median_ratio_to_torch"] = statistics.median(ratios)
        row["quality_vs_torch"] = quality.get(b)
        report["backends"][b] = row
    return report


def print_embedder_bench(report: dict[str, Any]) -> None:
    click.echo(f"{report['texts']} distinct texts, {report['rounds']} interleaved rounds")
    for b, row in report["backends"].items():
        parts = []
        for mode, fig in row.items():
            if not isinstance(fig, dict) or "median_texts_per_s" not in fig:
                continue
            ratio = fig.get("median_ratio_to_torch")
            parts.append(
                f"{mode} {fig['median_texts_per_s']:.1f}/s"
                + (f" (x{ratio:.2f} torch)" if ratio is not None else "")
            )
        click.echo(f"{b:>9} [{row['model_name']}]: " + ", ".join(parts))
        q = row["quality_vs_torch"]
        if q:
            click.echo(
                f"{'':>9}  vs torch: max |diff| {q['max_abs_diff']:.2e}, cosine min "
                f"{q['min_cosine']:.6f} mean {q['mean_cosine']:.6f}"
            )
