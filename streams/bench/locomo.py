"""`lychee bench locomo`: evidence recall, cost and latency through the real pipeline.

Each conversation is ingested through Kafka as its own namespace, the run waits until
every stage has committed its input, and every question of categories 1-4 goes through
the request/reply topics. The baselines (dense, BM25, their fusion) rank the same turns
in-process and are scored by the same recall code. When the questions carry a type or
name the turns behind two statements (`workers.datasets.QA`), every system is also scored
per type and by the checks of `workers.evaluation.pairs`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from tqdm import tqdm

from schemas import EvidenceItem, QueryReply, Segment
from schemas import topics as t
from schemas.records import RecordBatch
from streams.bench import harness
from streams.bench.errors import BenchError
from streams.bench.harness import Variant
from streams.bench.judging import JudgeTarget, answered, grade_all, proven_judge, unproven_note
from streams.client import MemoryClient
from streams.factories import make_embedder, open_store
from streams.ingest import produce
from streams.kafka.lag import LagReader
from streams.kafka.reader import read_topic
from streams.settings import Settings
from workers.datasets import Conversation
from workers.embedding import Embedder
from workers.encoder.estimate import eager_segments, prompt_tokens_for
from workers.evaluation.baselines import BASELINES, conversation_corpus
from workers.evaluation.judge import LLMJudge, accuracy_by_category
from workers.evaluation.judge_check import JudgeCheck
from workers.evaluation.metrics import (
    CATEGORIES,
    CATEGORY_ORDER,
    QuestionResult,
    RankedItem,
    aggregate,
    aggregate_by_kind,
    percentiles,
)
from workers.evaluation.pairs import pair_counts
from workers.evaluation.report import LocomoReport, validate_report
from workers.query.serialize import item_line
from workers.store import EvidenceStore

S = TypeVar("S", Segment, RecordBatch)
RETRIEVE_K = 100  # enough items for the largest budget; recall@k reads the first k


@dataclass
class Question:
    namespace: str
    text: str
    category: str
    gold: frozenset[str]
    answer: str = ""  # the gold answer, for the judge
    kind: str | None = None  # the question's type, when the data types its questions
    sources: dict[str, list[str]] = field(default_factory=dict)  # `workers.evaluation.pairs`

    def result(self, items: list[RankedItem], latency_ms: float) -> QuestionResult:
        """A system's reply to this question, as the metrics score it."""
        return QuestionResult(self.category, self.gold, items, latency_ms, self.kind, self.sources)


@dataclass
class Run:
    questions: list[Question] = field(default_factory=list)
    lychee: list[QuestionResult] = field(default_factory=list)
    baselines: dict[str, list[QuestionResult]] = field(default_factory=dict)
    round_trip_ms: list[float] = field(default_factory=list)
    query_calls: int = 0  # query-time LLM calls (planner, answers) over all questions
    query_tokens: int = 0
    replies: list[QueryReply] = field(default_factory=list)  # lychee's, in question order


def evidence_line(item: EvidenceItem) -> RankedItem:
    """A retrieved item as it sits in the serialized context, with its provenance."""
    return RankedItem(item_line(item), tuple(item.turn_ids))


def dump_row(
    namespace: str, question: str, category: str, gold: frozenset[str], reply: QueryReply
) -> dict[str, Any]:
    """One reply as `--dump` files hold it (`python -m tests.evals.compare` pairs two)."""
    return {
        "namespace": namespace,
        "question": question,
        "category": category,
        "gold": sorted(gold),
        "plan": reply.plan,
        "items": [e.model_dump(mode="json") for e in reply.evidence],
    }


def run_locomo(
    settings: Settings,
    data: Path,
    conversation_ids: list[str] | None = None,
    variant: str = "full",
    ks: tuple[int, ...] = (5, 10, 15),
    budgets: tuple[int, ...] = (500, 1000, 2000),
    progress: bool = True,
    also: tuple[str, ...] = (),
    judge: JudgeTarget | None = None,
    dump: Path | None = None,
) -> LocomoReport:
    """`also`: per-request variants asked over the same ingest, reported as `lychee:<name>`.
    `judge`: answers are generated and graded by it (LoCoMo's judge protocol).
    `dump`: every lychee reply's evidence written there, under the file's own namespaces."""
    chosen = harness.variant(variant)
    extra = [harness.variant(name) for name in also]
    if bad := [v.name for v in extra if v.worker_env or v.ablation is None]:
        raise BenchError(
            f"--also takes per-request ablations only (one ingest serves them all), not "
            f"{', '.join(bad)}: run a worker variant as --variant"
        )
    started = time.perf_counter()
    conversations, skipped = harness.load_reported(data)
    if conversation_ids:
        wanted = set(conversation_ids)
        conversations = [c for c in conversations if c.namespace in wanted]
        skipped = [s for s in skipped if s.namespace in wanted]
        missing = wanted - {c.namespace for c in conversations}
        if missing:
            raise BenchError(f"no conversation {', '.join(sorted(missing))} in {data}")
    # a run-unique prefix keeps repeated runs against one stack apart
    prefix = f"b{uuid.uuid4().hex[:6]}-"
    for conv in conversations:
        harness.rename_namespace(conv, prefix + conv.namespace)
    with harness.pipeline(settings, chosen) as live:
        report, run = asyncio.run(
            _run(live, data, conversations, chosen, ks, budgets, progress, started, extra, judge)
        )
    # the messages of the file the contract refuses, each named: none of them was ingested
    report = validate_report({**report.to_json_dict(), "skipped": [s.as_dict() for s in skipped]})
    if dump is not None:
        rows = [
            dump_row(q.namespace.removeprefix(prefix), q.text, q.category, q.gold, reply)
            for q, reply in zip(run.questions, run.replies, strict=True)
        ]
        dump.write_text(json.dumps(rows))
    return report


async def _run(
    settings: Settings,
    data: Path,
    conversations: list[Conversation],
    variant: Variant,
    ks: tuple[int, ...],
    budgets: tuple[int, ...],
    progress: bool,
    started: float,
    extra: list[Variant],
    judge_at: JudgeTarget | None,
) -> tuple[LocomoReport, Run]:
    embedder = await asyncio.to_thread(make_embedder, settings)
    store = open_store(settings, embedder)
    run = Run(questions=_questions(conversations))
    judge, check = None, None
    if judge_at is not None:  # before the run: a judge that fails its check grades nothing
        judge, check = await proven_judge(settings, judge_at, tqdm.write)
    async with MemoryClient(settings) as client:
        ingest = await _ingest(settings, client, store, conversations, progress)
        segments = await _by_segment(settings, t.SEGMENTS, Segment, conversations)
        batches = await _by_segment(settings, t.RECORDS, RecordBatch, conversations)
        # an answer from a slow model takes minutes: the longest deadline the service takes
        wait_s = settings.query.max_deadline_s if judge else 60.0
        await _ask(
            client, run, max(RETRIEVE_K, *ks), progress, variant.ablation, wait_s, bool(judge)
        )
        for other in extra:
            more = Run(questions=run.questions)
            await _ask(client, more, max(RETRIEVE_K, *ks), progress, other.ablation)
            run.baselines[f"lychee:{other.name}"] = more.lychee
    _baselines(embedder, conversations, run, max(RETRIEVE_K, *ks))
    systems = _systems(run, ks, budgets)
    grades = await _grades(judge, check, run)
    systems["lychee"]["accuracy"] = grades.accuracy
    turns = sum(c.turn_count for c in conversations)
    seg_turns = [len(s.turn_ids) for s in segments]
    construction = _construction(segments, batches, conversations)
    by_type = {
        c.namespace: await asyncio.to_thread(store.count_by_type, c.namespace)
        for c in conversations
    }
    report = {
        "schema": "lychee.bench.locomo/1",
        "data": str(data),
        "variant": variant.name,
        "llm": settings.llm.model if settings.llm.configured else None,
        "judge": judge_at.model if judge_at is not None else None,
        "judge_check": check.as_dict() if check is not None else None,
        "failed_answers": grades.failed,
        "embedding": embedder.model_name,
        "conversations": len(conversations),
        "turns": turns,
        "questions": len(run.questions),
        "systems": systems,
        "construction": {
            "segments": len(segments),
            "turns_per_segment": round(float(np.mean(seg_turns)), 3) if seg_turns else 0.0,
            **construction,
        },
        "index_by_type": by_type,
        "query": {
            "llm_calls_per_question": _per_question(run.query_calls, run),
            "llm_tokens_per_question": _per_question(run.query_tokens, run),
        },
        "ingest": ingest,
        "counts": aggregate(run.lychee, ks, budgets)["counts"],
        "seconds": round(time.perf_counter() - started, 1),
        "notes": [
            f"encoder: {', '.join(sorted({b.encoder for b in batches})) or 'none'}; prompt "
            "estimates use the encoder's prompt builder with the session's reference context",
            "no LLM configured: accuracy is null; the heuristic planner makes no LLM call"
            if not settings.llm.configured
            else grades.note,
            f"lychee latency is the query service's retrieval time; client round trip p50/p95: "
            f"{percentiles(run.round_trip_ms)}",
            f"segments by reason: {_reasons(segments)}",
        ],
    }
    return validate_report(report), run


def _systems(run: Run, ks: tuple[int, ...], budgets: tuple[int, ...]) -> dict[str, Any]:
    """Each system's recall and latency (accuracy is filled in when answers are judged); per
    question type and the checks of two named statements when the data has them."""
    systems: dict[str, Any] = {}
    for name, results in [("lychee", run.lychee), *run.baselines.items()]:
        agg = aggregate(results, ks, budgets)
        by_kind = aggregate_by_kind(results, ks, budgets)
        systems[name] = {
            "recall_at_k": agg["recall_at_k"],
            "recall_at_budget": agg["recall_at_budget"],
            "hit_at_k": agg["hit_at_k"],
            "latency_ms": agg["latency_ms"],
            "accuracy": None,
            "by_kind": by_kind if by_kind["counts"] else None,
            "pairs": pair_counts(results) or None,
        }
    return systems


def _questions(conversations: list[Conversation]) -> list[Question]:
    out = []
    for conv in conversations:
        for qa in conv.qa:
            category = CATEGORIES.get(qa.category)
            if category is not None:
                evidence = frozenset(qa.evidence)
                out.append(
                    Question(
                        conv.namespace,
                        qa.question,
                        category,
                        evidence,
                        str(qa.answer),
                        qa.kind,
                        qa.sources,
                    )
                )
    return out


async def _ingest(
    settings: Settings,
    client: MemoryClient,
    store: EvidenceStore,
    conversations: list[Conversation],
    progress: bool,
) -> dict[str, Any]:
    """Produce everything, timing each turn from produce-ack to searchable in LanceDB."""
    acked: dict[tuple[str, str], float] = {}
    seen: dict[tuple[str, str], float] = {}
    done = asyncio.Event()

    async def poll() -> None:
        """Every half second, the turn ids of each namespace that still has turns to see: a
        tighter loop reading whole id lists takes half a core from the stages it measures."""
        left = {c.namespace for c in conversations}
        while left and (not done.is_set() or len(seen) < len(acked)):
            for ns in sorted(left):
                ids = await asyncio.to_thread(store.turns.ids, ns)
                now = time.perf_counter()
                for tid in ids:
                    seen.setdefault((ns, tid), now)
                if done.is_set() and all(k in seen for k in acked if k[0] == ns):
                    left.discard(ns)
            await asyncio.sleep(0.5)

    poller = asyncio.create_task(poll())
    t0 = time.perf_counter()
    total = sum(len(s.exchanges) for c in conversations for s in c.sessions)
    bar = tqdm(total=total, unit="ex", desc="ingest", disable=not progress, leave=False)
    for conv in conversations:
        for session in conv.sessions:
            single = Conversation(conv.namespace, [session])
            await produce(client, [single], progress=False)
            now = time.perf_counter()
            for ex in session.exchanges:
                for tid in ex.turn_ids():
                    acked[(conv.namespace, tid)] = now
            bar.update(len(session.exchanges))
    bar.close()
    async with LagReader(settings.kafka.bootstrap) as lag:
        await lag.wait_drained(timeout_s=1800)
    seconds = time.perf_counter() - t0
    done.set()
    await asyncio.wait_for(poller, timeout=120)
    lags = [(seen[k] - acked[k]) * 1e3 for k in acked if k in seen]
    return {
        "exchanges": total,
        "seconds": round(seconds, 2),
        "exchanges_per_second": round(total / seconds, 2) if seconds else 0.0,
        "searchable_lag_ms": percentiles(lags),
        "embeddings": await harness.embedding_counts(settings, total),
    }


async def _by_segment(
    settings: Settings, topic: str, model: type[S], conversations: list[Conversation]
) -> list[S]:
    """The run's messages of a segment-keyed topic, one per segment id (a redelivered copy
    is the same message)."""
    wanted = {c.namespace for c in conversations}
    out: dict[str, S] = {}
    for key, value, _ in await read_topic(settings.kafka.bootstrap, topic):
        if key is not None and key.decode().split("/", 1)[0] in wanted and value is not None:
            msg = model.model_validate_json(value)
            out[msg.segment_id] = msg
    return list(out.values())


def _construction(
    segments: list[Segment], batches: list[RecordBatch], conversations: list[Conversation]
) -> dict[str, int]:
    """Encoder calls and tokens of the run, and the eager variant's prompt tokens, same builder."""
    real = [b for b in batches if not b.usage.estimated]
    return {
        "encoder_calls": sum(b.usage.calls or 1 for b in batches),
        "llm_input_tokens": sum(b.usage.input_tokens for b in real),
        "llm_output_tokens": sum(b.usage.output_tokens for b in real),
        "prompt_tokens_estimate": prompt_tokens_for(segments),
        "eager_prompt_tokens_estimate": prompt_tokens_for(
            eager_segments([s.exchanges for c in conversations for s in c.sessions])
        ),
    }


@dataclass(frozen=True)
class Grades:
    """The accuracy of lychee's answers per category (None: not judged), the note that says
    how it was judged or why not, and the answers that failed."""

    accuracy: dict[str, float] | None
    note: str
    failed: list[dict[str, Any]] | None = None


async def _grades(judge: LLMJudge | None, check: JudgeCheck | None, run: Run) -> Grades:
    """Every answer graded by the LoCoMo judge protocol, a failed one wrong and never judged:
    the share judged CORRECT per category (0.0 for a category without questions, as recall:
    `counts` tells them apart). Nothing is judged without a judge that passed its check."""
    if check is None:
        return Grades(None, "accuracy is null: answers are not judged (run with --answer)")
    if judge is None:
        return Grades(None, unproven_note(check))
    items = [
        answered(q.text, q.answer, r.answer, r.answer_error)
        for q, r in zip(run.questions, run.replies, strict=True)
    ]
    verdicts = await grade_all(judge, items)
    counts = accuracy_by_category(
        (q.category, v.correct) for q, v in zip(run.questions, verdicts, strict=True)
    )
    accuracy = {
        c: round(counts[c][0] / counts[c][1], 4) if c in counts else 0.0 for c in CATEGORY_ORDER
    }
    failed = [
        {"namespace": q.namespace, "question": q.text, "category": q.category, "reason": v.failed}
        for q, v in zip(run.questions, verdicts, strict=True)
        if v.failed is not None
    ]
    note = (
        f"accuracy judged by {judge.model} with the LoCoMo judge protocol (paper App. E.5), "
        f"{check.line()}; {sum(v.correct is None for v in verdicts)} answers without a verdict "
        f"and {len(failed)} failed answers (never judged) count as wrong"
    )
    return Grades(accuracy, note, failed)


def _per_question(total: int, run: Run) -> float:
    return round(total / len(run.questions), 3) if run.questions else 0.0


def _reasons(segments: list[Segment]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in segments:
        out[s.reason.value] = out.get(s.reason.value, 0) + 1
    return out


async def _ask(
    client: MemoryClient,
    run: Run,
    k: int,
    progress: bool,
    ablation: str | None,
    timeout_s: float = 60.0,
    answer: bool = False,
) -> None:
    bar = tqdm(
        total=len(run.questions), unit="q", desc="questions", disable=not progress, leave=False
    )
    gate = asyncio.Semaphore(8)

    async def one(q: Question) -> tuple[Question, QueryReply, float]:
        async with gate:
            t0 = time.perf_counter()
            reply = await client.search(
                q.namespace, q.text, k=k, timeout_s=timeout_s, ablation=ablation, answer=answer
            )
            bar.update(1)
            return q, reply, (time.perf_counter() - t0) * 1e3

    for q, reply, rt in await asyncio.gather(*(one(q) for q in run.questions)):
        items = [evidence_line(e) for e in reply.evidence]
        run.lychee.append(q.result(items, reply.timings_ms.get("total", 0.0)))
        run.round_trip_ms.append(rt)
        run.query_calls += reply.usage.get("calls", 0)
        run.query_tokens += reply.usage.get("input_tokens", 0) + reply.usage.get("output_tokens", 0)
        run.replies.append(reply)
    bar.close()


def _baselines(embedder: Embedder, conversations: list[Conversation], run: Run, k: int) -> None:
    for name in BASELINES:
        run.baselines[name] = []
    by_ns: dict[str, list[Question]] = {}
    for q in run.questions:
        by_ns.setdefault(q.namespace, []).append(q)
    for conv in conversations:
        corpus = conversation_corpus(conv, embedder)
        questions = by_ns.get(conv.namespace, [])
        qvecs = embedder.embed([q.text for q in questions])
        for q, vec in zip(questions, qvecs, strict=True):
            for name in BASELINES:
                t0 = time.perf_counter()
                items = corpus.ranked(name, q.text, vec, k)
                ms = (time.perf_counter() - t0) * 1e3
                run.baselines[name].append(q.result(items, ms))
