"""Construction prompt tokens of a segmentation, with the encoder's own prompt builder.

Used to compare segment-level encoding with the eager per-exchange variant in one run
(the paper's 204.1K vs 849.9K tokens per LoCoMo conversation): the same prompt builder
and the same reference-context bookkeeping, only the unit of encoding differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from schemas import Exchange, Segment, SegmentMode
from workers.encoder.extractive import encode_extractive
from workers.encoder.prompts import build_messages
from workers.encoder.reference import ReferenceContext
from workers.segmenter.params import PAPER_CALIBRATION, SegmenterParams
from workers.segmenter.policy import SegmentPolicy, SessionState
from workers.tokens import count_tokens, prompt_tokens


def prompt_tokens_for(segments: Iterable[Segment]) -> int:
    """Sum of encoder prompt tokens, carrying each session's reference context in order."""
    contexts: dict[tuple[str, str], ReferenceContext] = {}
    total = 0
    for seg in sorted(segments, key=lambda s: (s.namespace, s.session_id, s.index)):
        key = (seg.namespace, seg.session_id)
        ctx = contexts.get(key, ReferenceContext())
        rendered = ctx.render()
        total += prompt_tokens(build_messages(seg, rendered))
        out = encode_extractive(seg, rendered)
        contexts[key] = ctx.advanced(seg.index, out.disambiguation_context, out.records)
    return total


def eager_segments(sessions: Iterable[Sequence[Exchange]]) -> list[Segment]:
    """One segment per exchange, exactly as the segmenter's eager mode cuts them."""
    policy = SegmentPolicy(SegmenterParams(mode=SegmentMode.eager), PAPER_CALIBRATION, count_tokens)
    out: list[Segment] = []
    unit = np.ones(4, dtype=np.float32)  # eager mode reads no embedding signal
    for exchanges in sessions:
        if not exchanges:
            continue
        state = SessionState(namespace=exchanges[0].namespace, session_id=exchanges[0].session_id)
        for ex in exchanges:
            out += policy.step(state, ex, unit, 0.0).finalized
        out += policy.flush(state)
    return out
