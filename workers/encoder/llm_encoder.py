"""The LLM segment encoder: one chat completion per segment against any OpenAI-compatible server.

Failures come out as two errors the stage can act on (`workers.encoder.errors`):
`LLMUnavailable` (the server is overloaded or unreachable: pause and retry the segment
later, never drop it) and `InvalidEncoderOutput` (the reply stayed unusable after one
repair: dead-letter the segment). The call and its retry rule are the shared ones of
`workers.llm`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog
from pydantic import ValidationError

from schemas import Segment
from schemas.records import DISAMBIGUATION_MAX_CHARS, MemoryRecord, Temporal
from schemas.supersession import LinkKind, Supersession
from workers.encoder.encoded import EncodedSegment, build_record, segment_turns
from workers.encoder.errors import EncoderError, InvalidEncoderOutput, LLMUnavailable
from workers.encoder.extractive import encode_extractive
from workers.encoder.grounded import as_compared, of_the_segment, without_placeholders
from workers.encoder.prompts import (
    EarlierRecord,
    EncoderReply,
    ReplyRecord,
    build_messages,
    repair_message,
    reply_schema_for,
)
from workers.llm.calls import ChatCaller
from workers.llm.completion import Completion
from workers.llm.errors import CompletionError
from workers.llm.formats import JsonSchema
from workers.llm.policy import RetryPolicy
from workers.llm.replies import json_object, schema_errors
from workers.llm.usage import total_usage, usage_of

MAX_EARLIER = 8  # earlier records a prompt shows

log = structlog.get_logger("lychee.encoder")


class EarlierRecords(Protocol):
    """Where the encoder finds the stored records a segment may update (by subject)."""

    def about(self, segment: Segment, limit: int) -> Sequence[EarlierRecord]: ...


class LLMEncoder(ChatCaller):
    """Segment -> records with one completion, at most one repair, bounded transient retries.

    Backoff is full jitter (`uniform(0, min(max_delay_s, base_delay_s * 2**n))`), never less
    than the server's Retry-After. A Retry-After longer than `max_delay_s` ends the attempts
    at once: such a wait belongs to the caller's pause, not to a sleeping task.
    """

    policy = RetryPolicy(max_attempts=5, base_delay_s=0.5, max_delay_s=30.0)

    def __init__(self, *args: Any, earlier: EarlierRecords | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.earlier = earlier  # None: no earlier records shown, no supersessions asked

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment:
        """Records of `segment`: LLMUnavailable means later, InvalidEncoderOutput dead-letter;
        a bare EncoderError is a request the server refuses (4xx: key, model, size)."""
        # Seeded by the segment so a redelivered segment waits the same way (and tests replay).
        rng = self._rng or random.Random(segment.segment_id)
        turns = segment_turns(segment)
        if not turns:  # a segment of an earlier segmenter that held tool items only
            return EncodedSegment(records=[], encoder=self.name)
        earlier = (  # a LanceDB read: off the loop the stage's other messages share
            await asyncio.to_thread(lambda e: list(e.about(segment, MAX_EARLIER)), self.earlier)
            if self.earlier
            else []
        )
        messages = build_messages(segment, reference_context, earlier)
        call = _Call(reply_schema_for(len(turns), len(earlier)), reply_budget(len(turns)))
        completion = await self._complete(messages, rng, call)
        usages = [usage_of(completion, messages)]
        n = (len(turns), len(earlier))
        try:
            reply = parse_completion(completion, n, call.max_tokens)
        except InvalidEncoderOutput as first:
            repair = [
                *messages,
                {"role": "assistant", "content": first.raw},
                repair_message(first.reason, len(turns)),
            ]
            completion = await self._complete(repair, rng, call)
            usages.append(usage_of(completion, repair))
            reply = parse_completion(completion, n, call.max_tokens)

        written = [r for r in reply.records if r.semantic_text.strip()]
        shown = frozenset(as_compared(e.text) for e in earlier)
        before, now = as_compared(reference_context), as_compared(" ".join(t for *_, t in turns))
        kept = [r for r in written if of_the_segment(r.semantic_text, shown, before, now)]
        if len(kept) < len(written):
            log.warning(
                "encoder.records_not_of_the_segment",
                segment_id=segment.segment_id,
                dropped=len(written) - len(kept),
                written=len(written),
            )
        if written and not kept:  # nothing of it is of these turns: their own sentences
            own = await asyncio.to_thread(encode_extractive, segment, reference_context)
            return replace(own, usage=total_usage(usages))
        ids = [tid for tid, _, _ in turns]
        made = [
            (
                r,
                build_record(
                    segment,
                    r.memory_type,
                    r.semantic_text,
                    [ids[i] for i in r.evidence_turns] or ids,
                    entities=without_placeholders(r.entities),
                    tags=without_placeholders(r.tags),
                    temporal=Temporal(**r.temporal.model_dump()),
                    source_role=r.source_role,
                ),
            )
            for r in kept
        ]
        return EncodedSegment(
            records=[rec for _, rec in made],
            supersessions=[s for r, rec in made for s in self._links(segment, r, rec, earlier)],
            disambiguation_context=reply.disambiguation_context[:DISAMBIGUATION_MAX_CHARS],
            usage=total_usage(usages),
            encoder=self.name,
        )

    def _links(
        self,
        segment: Segment,
        said: ReplyRecord,
        rec: MemoryRecord,
        earlier: Sequence[EarlierRecord],
    ) -> list[Supersession]:
        """What the model says `rec` supersedes or contradicts among the earlier records."""
        out = []
        for kind, indexes in (
            (LinkKind.supersedes, said.supersedes),
            (LinkKind.conflict, said.contradicts),
        ):
            for j in dict.fromkeys(indexes):
                if earlier[j].record_id == rec.record_id:
                    continue  # the same statement again, not a change
                out.append(
                    Supersession(
                        namespace=segment.namespace,
                        kind=kind,
                        older_id=earlier[j].record_id,
                        newer_id=rec.record_id,
                        changed_at=segment.session_date,
                        reason=f"the encoder read it as {'replacing' if kind is LinkKind.supersedes else 'contradicting'} [E{j}]",
                        found_by=self.name,
                    )
                )
        return out

    async def _complete(
        self, messages: list[dict[str, str]], rng: random.Random, call: _Call
    ) -> Completion:
        """`ChatCaller._call`; a refusal becomes EncoderError, exhaustion LLMUnavailable,
        a reply still being written at the total limit InvalidEncoderOutput at once (a
        repair would take as long)."""
        try:
            return await self._call(
                messages, rng, call.schema, "memory_records", max_tokens=call.max_tokens
            )
        except CompletionError as err:
            if err.overlong:
                raise InvalidEncoderOutput(err.partial, err.reason) from err.error
            if err.retryable_exhausted:
                raise LLMUnavailable(err.reason, err.retry_after_s, err.tokens_per_s) from err.error
            raise EncoderError(f"the LLM server refused the request: {err.error}") from err.error


@dataclass(frozen=True)
class _Call:
    schema: JsonSchema
    max_tokens: int


def reply_budget(n_turns: int) -> int:
    """Output tokens a segment's reply may take: a few records a turn at most, a record
    about 140 tokens of JSON (a reply of 7 records for 7 turns takes 967), with room to spare.
    A small model that loops inside its JSON stops here instead of at the total limit."""
    return 512 + 256 * max(n_turns, 1)


def parse_completion(completion: Completion, n: tuple[int, int], max_tokens: int) -> EncoderReply:
    """`parse_reply` for (turns, earlier records), saying so when the reply was cut at its
    token limit."""
    try:
        return parse_reply(completion.text, *n)
    except InvalidEncoderOutput as exc:
        if completion.finish_reason != "length":
            raise
        reason = (
            f"the reply was cut at its limit of {max_tokens} tokens before it ended ("
            f"{exc.reason}); write fewer and shorter records"
        )
        raise InvalidEncoderOutput(exc.raw, reason) from exc


def parse_reply(raw: str, n_turns: int, n_earlier: int = 0) -> EncoderReply:
    """The validated reply; InvalidEncoderOutput names the problem for the repair prompt."""
    try:
        data = json_object(raw)
    except ValueError as exc:
        raise InvalidEncoderOutput(raw, str(exc)) from exc
    try:
        return EncoderReply.model_validate(
            data, context={"n_turns": n_turns, "n_earlier": n_earlier}
        )
    except ValidationError as exc:
        raise InvalidEncoderOutput(raw, schema_errors(exc)) from exc
