"""`lychee bench llm`: the paper's LLM path against the configured endpoint, segment by
segment and question by question, printed as it comes out.

In one process, without a broker: the conversation is segmented by the real policy on the
configured embedder; the first N segments go through the real `LLMEncoder` (streamed,
structured output, one repair) with the session's reference context carried as the stage
carries it; their turns and records are indexed into a temporary LanceDB by the real
indexer; then M questions go through the real query service with the LLM planner and
answerer, and, with a judge that passes its sanity check, each generated answer is graded
by the LoCoMo judge protocol (a failed answer is wrong, never judged). An
outcome the encoder stage would dead-letter (still invalid after the repair) or pause on
(the LLM unavailable after its attempts) is counted as such, and the run goes on.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from schemas import QueryRequest, Segment
from schemas.records import RecordBatch
from streams.bench.errors import BenchError
from streams.bench.harness import data_format, load_reported, pick_conversation
from streams.bench.judging import JudgeTarget, answered, grade, judge_target, proven_judge
from streams.bench.llm_report import (
    DEAD_LETTERED,
    FIRST_TRY,
    REFUSED,
    REPAIRED,
    UNAVAILABLE,
    LLMBenchReport,
    QuestionResult,
    SegmentResult,
    format_summary,
    question_line,
    segment_line,
)
from streams.factories import (
    adapter_of,
    llm_caller_options,
    make_embedder,
    make_llm_client,
    open_store,
    recall_config,
)
from streams.settings import Settings
from workers.datasets import Conversation
from workers.embedding import Embedder
from workers.encoder.encoded import record_batch
from workers.encoder.errors import EncoderError, InvalidEncoderOutput, LLMUnavailable
from workers.encoder.llm_encoder import LLMEncoder
from workers.encoder.prompts import build_messages
from workers.encoder.reference import ReferenceContext
from workers.evaluation.judge import LLMJudge, Verdict
from workers.evaluation.metrics import CATEGORIES
from workers.indexer.service import IndexBatch, IndexerService
from workers.llm.observer import Attempt
from workers.query.answer import LLMAnswerer
from workers.query.planner.llm_planner import LLMPlanner
from workers.query.service import QueryDeps, QueryService
from workers.segmenter.policy import SegmentPolicy, SessionState
from workers.segmenter.vectors import embed_exchanges, raw_turns
from workers.tokens import count_tokens, prompt_tokens

Echo = Callable[[str], None]


class Attempts:
    """The observer of a run's LLM calls: every attempt, in order
    (`workers.llm.observer.CallObserver`)."""

    def __init__(self) -> None:
        self.seen: list[Attempt] = []

    def attempt(self, model: str, attempt: Attempt) -> None:
        self.seen.append(attempt)

    def retry(self, model: str) -> None:
        return None

    def since(self, start: int) -> list[Attempt]:
        return self.seen[start:]


def first_segments(
    conv: Conversation, embedder: Embedder, settings: Settings, n: int
) -> tuple[list[Segment], list[Any]]:
    """The conversation's first `n` segments by the configured policy, and the raw turns
    (with their embeddings) of the exchanges they hold."""
    p = settings.segmenter.params
    policy = SegmentPolicy(p, p.calibration_for(embedder.model_name), count_tokens)
    segments: list[Segment] = []
    turns: dict[str, Any] = {}
    for session in conv.sessions:
        state = SessionState(namespace=conv.namespace, session_id=session.session_id)
        vectors = embed_exchanges(embedder, session.exchanges)
        for ex, (vec, turn_vecs) in zip(session.exchanges, vectors, strict=True):
            for raw in raw_turns(ex, turn_vecs, embedder.model_name):
                turns[raw.turn_id] = raw
            segments += policy.step(state, ex, vec, 0.0).finalized
            if len(segments) >= n:
                break
        else:
            segments += policy.flush(state)
        if len(segments) >= n:
            break
    segments = segments[:n]
    kept = {tid for s in segments for tid in s.turn_ids}
    return segments, [turns[tid] for tid in turns if tid in kept]


async def encode_segments(
    encoder: LLMEncoder, attempts: Attempts, segments: list[Segment], echo: Echo
) -> tuple[list[SegmentResult], list[RecordBatch]]:
    """Each segment through the encoder with its session's reference context, a line each."""
    contexts: dict[str, ReferenceContext] = {}
    results: list[SegmentResult] = []
    batches: list[RecordBatch] = []
    for i, seg in enumerate(segments, 1):
        ctx = contexts.get(seg.session_id, ReferenceContext())
        before, t0 = len(attempts.seen), time.perf_counter()
        result = SegmentResult(
            seg.segment_id,
            len(seg.turn_ids),
            prompt_tokens(build_messages(seg, ctx.render())),
            FIRST_TRY,
            0.0,
        )
        try:
            encoded = await encoder.encode(seg, ctx.render())
            result.outcome = FIRST_TRY if encoded.usage.calls <= 1 else REPAIRED
            result.records = len(encoded.records)
            result.input_tokens = encoded.usage.input_tokens
            result.output_tokens = encoded.usage.output_tokens
            batches.append(record_batch(seg, encoded))
            contexts[seg.session_id] = ctx.advanced(
                seg.index, encoded.disambiguation_context, encoded.records
            )
        except InvalidEncoderOutput as exc:
            result.outcome, result.error = DEAD_LETTERED, exc.reason[:300]
        except LLMUnavailable as exc:
            result.outcome, result.error = UNAVAILABLE, str(exc)[:300]
        except EncoderError as exc:
            result.outcome, result.error = REFUSED, str(exc)[:300]
        result.seconds = time.perf_counter() - t0
        _speed(result, attempts.since(before))
        results.append(result)
        echo(segment_line(i, len(segments), result))
    return results, batches


def _speed(result: SegmentResult, seen: list[Attempt]) -> None:
    """The attempts' count, first time to first token and output speed (tokens over the
    seconds spent writing them, across the segment's completed calls)."""
    result.attempts = len(seen)
    done = [a.completion for a in seen if a.failure is None and a.completion is not None]
    firsts = [c.first_token_s for c in done if c.first_token_s is not None]
    result.first_token_s = firsts[0] if firsts else None
    writing = sum(c.seconds - c.first_token_s for c in done if c.first_token_s is not None)
    written = sum(c.output_tokens for c in done if c.first_token_s is not None)
    result.tokens_per_s = written / writing if writing > 0 and written else None


@dataclass(frozen=True)
class Ask:
    question: str
    category: str
    gold: str | None


def questions_of(
    conv: Conversation, turns: set[str], m: int, asks: tuple[str, ...]
) -> tuple[list[Ask], int]:
    """The questions asked on the command line, or the file's first `m` (categories 1-4)
    whose gold evidence lies within `turns`; and how many of the file's were left out."""
    if asks:
        return [Ask(q, "asked", None) for q in asks], 0
    usable = [
        Ask(qa.question, CATEGORIES[qa.category], str(qa.answer))
        for qa in conv.qa
        if qa.category in CATEGORIES and qa.evidence and set(qa.evidence) <= turns
    ]
    graded = sum(1 for qa in conv.qa if qa.category in CATEGORIES)
    return usable[:m], graded - len(usable)


async def ask_questions(
    service: QueryService,
    judge: LLMJudge | None,
    namespace: str,
    asks: list[Ask],
    echo: Echo,
    redact: bool = False,
) -> list[QuestionResult]:
    out: list[QuestionResult] = []
    for i, ask in enumerate(asks, 1):
        t0 = time.perf_counter()
        reply = await service.search(
            QueryRequest(
                correlation_id=uuid.uuid4().hex,
                namespace=namespace,
                query=ask.question,
                reply_partition=0,
                deadline_ms=int((time.time() + 86_400) * 1000),
                answer=True,
            )
        )
        item = answered(ask.question, ask.gold or "", reply.answer, reply.answer_error)
        result = QuestionResult(
            ask.question,
            ask.category,
            ask.gold,
            reply.answer or "",
            str((reply.plan or {}).get("source", "?")),
            time.perf_counter() - t0,
            reply.usage.get("input_tokens", 0) + reply.usage.get("output_tokens", 0),
            failure=item.failure,
            evidence_read=(reply.answer_items, len(reply.evidence)),
        )
        if judge is not None and ask.gold is not None:
            _judged(result, await grade(judge, item))
        out.append(result)
        echo(question_line(i, len(asks), result, out, redact))
    return out


def _judged(result: QuestionResult, verdict: Verdict) -> None:
    result.judged = True
    result.correct = verdict.correct
    result.judge_reasoning = verdict.reasoning
    result.judge_error = verdict.error


def run_llm_bench(
    settings: Settings,
    data: Path,
    fmt: str,
    conversation: str | None,
    segments_n: int,
    questions_n: int,
    asks: tuple[str, ...],
    judge: JudgeTarget | None,
    echo: Echo,
    redact: bool = False,
) -> LLMBenchReport:
    llm = make_llm_client(settings)
    if llm is None:
        raise BenchError("no LLM configured: set LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL")
    conv = pick_conversation(load_reported(data, fmt)[0], conversation, data)
    lance_dir = tempfile.mkdtemp(prefix="lychee-bench-llm-")
    try:
        return asyncio.run(
            _run(
                settings,
                llm,
                conv,
                data,
                (segments_n, questions_n),
                asks,
                judge,
                lance_dir,
                echo,
                redact,
            )
        )
    finally:
        shutil.rmtree(lance_dir, ignore_errors=True)


async def _run(
    settings: Settings,
    llm: Any,
    conv: Conversation,
    data: Path,
    sizes: tuple[int, int],
    asks: tuple[str, ...],
    judge_at: JudgeTarget | None,
    lance_dir: str,
    echo: Echo,
    redact: bool,
) -> LLMBenchReport:
    """The run: segments, encoding, indexing, then the questions. `sizes`: how many
    segments and questions."""
    started = time.perf_counter()
    segments_n, questions_n = sizes
    client, model = llm
    attempts = Attempts()
    embedder = await asyncio.to_thread(make_embedder, settings)
    segments, turns = await asyncio.to_thread(first_segments, conv, embedder, settings, segments_n)
    report = LLMBenchReport(str(data), conv.namespace, model, str(client.base_url), None)
    echo(
        f"{data} [{conv.namespace}]: {len(segments)} segments ({len(turns)} turns), "
        f"model {model} at {client.base_url}"
    )
    encoder = LLMEncoder(
        client,
        model,
        **llm_caller_options(settings, LLMEncoder.policy, attempts=True),
        observer=attempts,
    )
    report.segments, batches = await encode_segments(encoder, attempts, segments, echo)
    store = open_store(settings, embedder, uri=lance_dir)
    await IndexerService(store, embedder).write(IndexBatch(turns=turns, records=batches))
    chosen, report.skipped_questions = questions_of(
        conv, {t.turn_id for t in turns}, questions_n, asks
    )
    judge = None
    if judge_at is not None and any(a.gold for a in chosen):
        judge, check = await proven_judge(settings, judge_at, echo)
        report.judge, report.judge_check = judge_at.model, check.as_dict()
    deps = QueryDeps(
        store=store,
        embedder=embedder,
        planner=LLMPlanner(
            client, model, **llm_caller_options(settings, LLMPlanner.policy), observer=attempts
        ),
        answerer=LLMAnswerer(
            client, model, **llm_caller_options(settings, LLMAnswerer.policy), observer=attempts
        ),
        adapter=adapter_of(settings, embedder),
    )
    service = QueryService(deps, recall_config(settings))
    report.questions = await ask_questions(service, judge, conv.namespace, chosen, echo, redact)
    report.seconds = time.perf_counter() - started
    return report


def bench_llm(
    settings: Settings,
    data: Path,
    fmt: str | None,
    conversation: str | None,
    segments_n: int,
    questions_n: int,
    asks: tuple[str, ...],
    judge: tuple[str | None, str | None],
    out: Path | None,
    echo: Echo,
    redact: bool = False,
) -> LLMBenchReport:
    """The command: the run, its summary, and the JSON report when `out` is given. `fmt`
    None reads `.jsonl` files as JSON lines, anything else as LoCoMo."""
    fmt = data_format(data, fmt)
    target = judge_target(settings, *judge) if fmt == "locomo" and not asks else None
    report = run_llm_bench(
        settings, data, fmt, conversation, segments_n, questions_n, asks, target, echo, redact
    )
    echo(format_summary(report))
    if out is not None:
        out.write_bytes(orjson.dumps(report.to_json_dict(), option=orjson.OPT_INDENT_2))
        echo(f"report: {out}")
    return report
