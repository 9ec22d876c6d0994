"""What every encoder returns (`EncodedSegment`) and the `RecordBatch` it becomes, how a
record gets its ids, and the turns every encoder reads (`segment_turns`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from schemas import Segment
from schemas.exchange import turn_text
from schemas.records import (
    CONTEXT_MAX_CHARS,
    DISAMBIGUATION_MAX_CHARS,
    LABEL_MAX_CHARS,
    MAX_LABELS,
    SEMANTIC_TEXT_MAX_CHARS,
    MemoryRecord,
    MemoryType,
    RecordBatch,
    SourceRole,
    Temporal,
    TokenUsage,
    normalize_text,
    record_id,
)
from schemas.supersession import Supersession


@dataclass(frozen=True)
class EncodedSegment:
    """An encoder's output for one segment, before it becomes a `RecordBatch`."""

    records: list[MemoryRecord]
    disambiguation_context: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    encoder: str = "extractive"
    supersessions: list[Supersession] = field(default_factory=list)  # what the encoder found


def record_batch(segment: Segment, encoded: EncodedSegment) -> RecordBatch:
    """The segment's message on `memory.records`."""
    return RecordBatch(
        namespace=segment.namespace,
        session_id=segment.session_id,
        segment_id=segment.segment_id,
        segment_index=segment.index,
        first_turn_id=segment.first_turn_id,
        last_turn_id=segment.last_turn_id,
        session_date=segment.session_date,
        encoder=encoded.encoder,
        records=encoded.records,
        disambiguation_context=encoded.disambiguation_context[:DISAMBIGUATION_MAX_CHARS],
        usage=encoded.usage,
        supersessions=encoded.supersessions,
        reason=segment.reason,
        signals=segment.signals,
        first_seq=min(x.seq for x in segment.exchanges),
        last_seq=max(x.seq for x in segment.exchanges),
        exchanges=len(segment.exchanges),
        tokens=segment.tokens,
    )


def build_record(
    segment: Segment,
    memory_type: MemoryType,
    semantic_text: str,
    evidence: Sequence[str],
    *,
    entities: Sequence[str] = (),
    tags: Sequence[str] = (),
    temporal: Temporal | None = None,
    source_role: SourceRole = "",
    context: str = "",
) -> MemoryRecord:
    """A record of `segment` with its content-derived id and normalized text, held to the
    record's contract whatever the turns or a model wrote: one pasted token or heading
    longer than a label holds must not cost the segment its other records."""
    text = " ".join(semantic_text.split())[:SEMANTIC_TEXT_MAX_CHARS]
    normalized = normalize_text(memory_type, text)
    return MemoryRecord(
        record_id=record_id(segment.namespace, normalized),
        namespace=segment.namespace,
        memory_type=memory_type,
        semantic_text=text,
        normalized_text=normalized,
        entities=labels(e.strip() for e in entities),
        tags=labels(t.strip().lower() for t in tags),
        temporal=temporal or Temporal(),
        evidence=list(dict.fromkeys(evidence)),
        source_session=segment.session_id,
        segment_id=segment.segment_id,
        source_role=source_role,
        created_at=segment.session_date,
        context=" ".join(context.split())[:CONTEXT_MAX_CHARS],
    )


def labels(found: Iterable[str]) -> list[str]:
    """A record's entities or tags: each once, at most `MAX_LABELS`, none blank, and none
    longer than a label holds (a DNA string, a base64 blob, a heading of forty capitalized
    words: no name or topic a node is searched by, and cut it would be no truer)."""
    kept = (x for x in found if x and len(x) <= LABEL_MAX_CHARS)
    return list(dict.fromkeys(kept))[:MAX_LABELS]


def segment_turns(segment: Segment) -> list[tuple[str, str, str]]:
    """(turn id, speaker or role, text) of every turn that is memory (`Turn.memory`), in
    order: the encoders' input. The segmenter puts no other turn in a segment; an earlier
    one did, and its segments may still be in the topic."""
    out = []
    for ex in segment.exchanges:
        for tid, turn in zip(ex.turn_ids, ex.turns, strict=True):
            if not turn.memory:
                continue
            text = turn_text(turn.content, turn.image_caption)
            out.append((tid, turn.speaker or turn.role.value, text))
    return out
