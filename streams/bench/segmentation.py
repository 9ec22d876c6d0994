"""`lychee bench segmentation`: the segmenter policy over a LoCoMo file, no broker.

One embedding pass feeds the semantic, fixed-window and eager variants, so the three
segmentations differ only by the policy.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from schemas import Segment, SegmentMode
from streams.settings import Settings


def _segment_figures(segments: list[Segment], seconds: float) -> dict[str, Any]:
    turns = [sum(len(x.turn_ids) for x in s.exchanges) for s in segments]
    tokens = [s.tokens for s in segments]
    return {
        "segments": len(segments),
        "turns_in_segments": sum(turns),
        "turns_per_segment_mean": statistics.fmean(turns) if turns else 0.0,
        "turns_per_segment_median": statistics.median(turns) if turns else 0.0,
        "tokens_per_segment_mean": statistics.fmean(tokens) if tokens else 0.0,
        "tokens_per_segment_median": statistics.median(tokens) if tokens else 0.0,
        "reasons": dict(Counter(s.reason.value for s in segments).most_common()),
        "policy_seconds": seconds,
    }


def segmentation(
    settings: Settings, data_path: Path | str, fmt: str | None = None
) -> dict[str, Any]:
    """Semantic, fixed-window and eager segmentation of a conversation file (LoCoMo, or JSON
    lines: `harness.data_format`), one embedding pass."""
    from streams.bench.harness import data_format, load_reported
    from streams.factories import make_embedder
    from workers.segmenter.policy import SegmentPolicy, SessionState
    from workers.tokens import count_tokens

    conversations, _ = load_reported(data_path, data_format(data_path, fmt))
    exchanges = [ex for conv in conversations for ex in conv.exchanges]
    texts = [ex.remembered() for ex in exchanges]  # what the segmenter embeds
    embedder = make_embedder(settings)
    started = time.perf_counter()
    vectors = embedder.embed(texts)  # batched by the embedder, `embedding_batch_size` a batch
    embed_s = time.perf_counter() - started
    by_id = {(ex.namespace, ex.exchange_id): vectors[i] for i, ex in enumerate(exchanges)}

    base = settings.segmenter.params
    modes: dict[str, Any] = {}
    for mode in (SegmentMode.semantic, SegmentMode.fixed_window, SegmentMode.eager):
        p = base if base.mode is mode else base.model_copy(update={"mode": mode})
        policy = SegmentPolicy(p, p.calibration_for(embedder.model_name), count_tokens)
        segments: list[Segment] = []
        t0 = time.perf_counter()
        for conv in conversations:
            for session in conv.sessions:
                state = SessionState(namespace=conv.namespace, session_id=session.session_id)
                for ex in session.exchanges:
                    segments += policy.step(
                        state, ex, by_id[ex.namespace, ex.exchange_id], 0.0
                    ).finalized
                segments += policy.flush(state)
        modes[mode.value] = _segment_figures(segments, time.perf_counter() - t0)

    result = {
        "data": str(data_path),
        "embedding_model": embedder.model_name,
        "conversations": len(conversations),
        "sessions": sum(len(c.sessions) for c in conversations),
        "exchanges": len(exchanges),
        "turns": sum(len(ex.turns) for ex in exchanges),
        "embedding_texts_per_s": len(texts) / embed_s if embed_s > 0 else 0.0,
        "embedding_seconds": embed_s,
        "modes": modes,
    }
    _print_segmentation(result)
    return result


def _print_segmentation(r: dict[str, Any]) -> None:
    click.echo(
        f"{r['data']}: {r['conversations']} conversations, {r['sessions']} sessions, "
        f"{r['exchanges']} exchanges, {r['turns']} turns"
    )
    click.echo(
        f"embedding ({r['embedding_model']}): {r['exchanges']} texts in {r['embedding_seconds']:.1f}s "
        f"= {r['embedding_texts_per_s']:.1f} texts/s"
    )
    click.echo(
        f"{'mode':<13} {'segments':>8} {'turns/seg':>9} {'median':>6} {'tok/seg':>7} {'median':>6}  finalize reasons"
    )
    for mode, m in r["modes"].items():
        reasons = ", ".join(f"{k}={v}" for k, v in m["reasons"].items())
        click.echo(
            f"{mode:<13} {m['segments']:>8} {m['turns_per_segment_mean']:>9.2f} {m['turns_per_segment_median']:>6.1f} "
            f"{m['tokens_per_segment_mean']:>7.1f} {m['tokens_per_segment_median']:>6.1f}  {reasons}"
        )
