"""The two encoders behind the `SegmentEncoder` interface, with their errors translated."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson

from schemas import Segment
from schemas.records import TokenUsage
from workers.encoder.encoded import EncodedSegment
from workers.encoder.errors import EncoderError, InvalidEncoderOutput, LLMUnavailable
from workers.encoder.extractive import encode_extractive
from workers.encoder.llm_encoder import LLMEncoder
from workers.encoder.prompts import build_messages
from workers.errors import Refused, TemporarilyUnavailable, UnprocessableReply
from workers.tokens import count_tokens, prompt_tokens


class ExtractiveEncoder:
    """Offline and deterministic; its token figures are what the LLM prompt would cost."""

    name = "extractive"

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment:
        out = await asyncio.to_thread(encode_extractive, segment, reference_context)
        prompt = prompt_tokens(build_messages(segment, reference_context))
        usage = TokenUsage(
            input_tokens=prompt,
            output_tokens=count_tokens(records_json(out)),
            estimated=True,
            prompt_tokens=prompt,
            calls=0,
        )
        return dataclasses.replace(out, usage=usage)


class GuardedLLMEncoder:
    """The LLM encoder with its failures mapped onto what the stage does about them."""

    def __init__(self, llm: LLMEncoder) -> None:
        self.llm = llm
        self.name = "llm"

    async def encode(self, segment: Segment, reference_context: str) -> EncodedSegment:
        try:
            return await self.llm.encode(segment, reference_context)
        except InvalidEncoderOutput as exc:
            reason = f"encoder output still invalid after one repair: {exc.reason}"
            raise UnprocessableReply(reason) from exc
        except LLMUnavailable as exc:
            raise TemporarilyUnavailable(str(exc), exc.retry_after_s, exc.tokens_per_s) from exc
        except EncoderError as exc:
            # 400/413/422: this request can never succeed; anything else (401, 403, 404...)
            # is configuration, so pause rather than dead-letter every segment
            status = getattr(exc.__cause__, "status_code", None)
            if status in (400, 413, 422):
                raise UnprocessableReply(str(exc)) from exc
            raise Refused(
                str(exc), hint="check LYCHEE_LLM_API_KEY, LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL"
            ) from exc


def records_json(encoded: EncodedSegment) -> str:
    """The records as an LLM would have written them: the offline output-token estimate."""
    payload = {
        "records": [
            {
                "memory_type": r.memory_type.value,
                "semantic_text": r.semantic_text,
                "entities": r.entities,
                "temporal": r.temporal.model_dump(),
                "tags": r.tags,
                "evidence_turns": r.evidence,
                "source_role": r.source_role,
            }
            for r in encoded.records
        ],
        "disambiguation_context": encoded.disambiguation_context,
    }
    return orjson.dumps(payload).decode()
