"""What `lychee bench llm` measured: one result per segment and per question, the summary
figures and the lines printed as they come out."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from workers.evaluation.judge import accuracy_by_category

FIRST_TRY, REPAIRED, DEAD_LETTERED, UNAVAILABLE, REFUSED = (
    "first try",
    "after repair",
    "dead-lettered",
    "unavailable",
    "refused",
)


@dataclass
class SegmentResult:
    segment_id: str
    turns: int
    prompt_tokens: int
    outcome: str
    seconds: float
    records: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 0
    first_token_s: float | None = None
    tokens_per_s: float | None = None
    error: str | None = None


@dataclass
class QuestionResult:
    question: str
    category: str
    gold: str | None
    answer: str
    plan_source: str
    seconds: float
    tokens: int
    failure: str | None = None  # why no answer came back: wrong, and never judged
    evidence_read: tuple[int | None, int] = (None, 0)  # items the answer read, of those found
    judged: bool = False  # graded: by the judge, or wrong for a failed answer
    correct: bool | None = None  # None: judged without a usable verdict
    judge_reasoning: str = ""
    judge_error: str | None = None


@dataclass
class LLMBenchReport:
    data: str
    conversation: str
    model: str
    base_url: str
    judge: str | None
    segments: list[SegmentResult] = field(default_factory=list)
    questions: list[QuestionResult] = field(default_factory=list)
    skipped_questions: int = 0  # the file's questions whose evidence lies past the segments
    judge_check: dict[str, Any] | None = None  # `workers.evaluation.judge_check.JudgeCheck`
    seconds: float = 0.0

    def to_json_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": summary(self)}


def segment_line(i: int, n: int, r: SegmentResult) -> str:
    speed = f"{r.tokens_per_s:.1f} tok/s" if r.tokens_per_s else "- tok/s"
    first = f"first token {r.first_token_s:.1f} s" if r.first_token_s is not None else "no token"
    line = (
        f"segment {i}/{n} {r.segment_id}: {r.turns} turns, prompt ~{r.prompt_tokens} tok | "
        f"{r.outcome}, {r.records} records | {r.seconds:.1f} s ({first}), "
        f"{r.input_tokens} in / {r.output_tokens} out, {speed}, {r.attempts} attempt(s)"
    )
    return line + (f" | {r.error}" if r.error else "")


def question_line(
    i: int, n: int, r: QuestionResult, so_far: list[QuestionResult], redact: bool = False
) -> str:
    """One question as it comes out; `redact` leaves out the texts of the question, the
    answer and the gold answer (a file whose licence forbids copying them)."""
    got = f"failed: {r.failure}" if r.failure else repr(r.answer)
    said = f"(texts withheld) -> {'failed' if r.failure else 'answered'}" if redact else ""
    said = said or f"{r.question!r} -> {got}"
    line = (
        f"question {i}/{n} [{r.category}] {said} "
        f"(plan: {r.plan_source}, {r.seconds:.1f} s, {r.tokens} tokens)"
    )
    read, found = r.evidence_read
    if read is not None and read < found:
        line += f" | the answer read {read} of {found} items (context window)"
    if r.gold is not None and not redact:
        line += f" | gold {r.gold!r}"
    if r.judged:
        label = "CORRECT" if r.correct else "WRONG" if r.correct is False else "no verdict"
        label = "WRONG (failed, not judged)" if r.failure else label
        right = sum(1 for q in so_far if q.correct)
        judged = sum(1 for q in so_far if q.judged)
        line += f" | judge: {label} (running {right}/{judged})"
    return line


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summary(report: LLMBenchReport) -> dict[str, Any]:
    segs = [s for s in report.segments if s.outcome in (FIRST_TRY, REPAIRED)]
    outcomes = {
        o: sum(1 for s in report.segments if s.outcome == o)
        for o in (FIRST_TRY, REPAIRED, DEAD_LETTERED, UNAVAILABLE, REFUSED)
    }
    rates = [s.tokens_per_s for s in segs if s.tokens_per_s]
    out: dict[str, Any] = {
        "segments": len(report.segments),
        "outcomes": outcomes,
        "seconds_per_segment": {
            "median": _median([s.seconds for s in segs]),
            "mean": round(statistics.fmean([s.seconds for s in segs]), 2) if segs else None,
        },
        "tokens_per_segment": {
            "input": round(statistics.fmean([s.input_tokens for s in segs]), 1) if segs else None,
            "output": round(statistics.fmean([s.output_tokens for s in segs]), 1) if segs else None,
        },
        "output_tokens_per_s_median": _median([r for r in rates if r is not None]),
        "first_token_s_median": _median(
            [s.first_token_s for s in segs if s.first_token_s is not None]
        ),
        "records_per_segment": round(statistics.fmean([s.records for s in segs]), 2)
        if segs
        else None,
        "questions": len(report.questions),
        "planner_fallbacks": sum(1 for q in report.questions if q.plan_source != "llm"),
        "question_seconds_median": _median([q.seconds for q in report.questions]),
        "accuracy": accuracy(report.questions),
        "judge_check": report.judge_check,
        "failed_answers": [
            {"question": i, "category": q.category, "reason": q.failure}
            for i, q in enumerate(report.questions, 1)
            if q.failure is not None
        ],
    }
    return out


def accuracy(questions: list[QuestionResult]) -> dict[str, Any] | None:
    """Share judged CORRECT, overall and by category (no verdict counts as wrong)."""
    judged = [q for q in questions if q.judged]
    if not judged:
        return None
    counts = accuracy_by_category((q.category, q.correct) for q in judged)
    out: dict[str, Any] = {
        name: {"accuracy": round(right / n, 3), "correct": right, "n": n}
        for name, (right, n) in counts.items()
    }
    out["no_verdict"] = sum(1 for q in judged if q.correct is None)
    out["failed"] = sum(1 for q in judged if q.failure is not None)
    return out


def format_summary(report: LLMBenchReport) -> str:
    s = summary(report)
    o = s["outcomes"]
    lines = [
        f"model {report.model} at {report.base_url}; judge {report.judge or 'none'}; "
        f"{report.seconds:.0f} s in all",
        f"segments: {s['segments']}: {o[FIRST_TRY]} valid on the first try, {o[REPAIRED]} after "
        f"repair, {o[DEAD_LETTERED]} dead-lettered, {o[UNAVAILABLE]} unavailable (the stage "
        f"would pause), {o[REFUSED]} refused",
        f"seconds per segment: median {s['seconds_per_segment']['median']}, mean "
        f"{s['seconds_per_segment']['mean']}; tokens per segment: "
        f"{s['tokens_per_segment']['input']} in / {s['tokens_per_segment']['output']} out",
        f"output tokens/s (median over segments): {s['output_tokens_per_s_median']}; time to "
        f"first token (median): {s['first_token_s_median']} s",
        f"records per segment: {s['records_per_segment']}",
        f"questions: {s['questions']} ({report.skipped_questions} of the file's left out: their "
        f"evidence lies past the segments encoded); planner fallbacks: "
        f"{s['planner_fallbacks']}; seconds per question (median): {s['question_seconds_median']}",
    ]
    return "\n".join(lines + _grading_lines(report, s))


def _grading_lines(report: LLMBenchReport, s: dict[str, Any]) -> list[str]:
    """The failed answers, listed apart, then the accuracy with its judge's sanity check,
    or why there is none."""
    lines = [
        f"failed answers (wrong, never judged): {len(s['failed_answers'])}",
        *(
            f"  question {f['question']} [{f['category']}]: {f['reason']}"
            for f in s["failed_answers"]
        ),
    ]
    check = report.judge_check
    acc = s["accuracy"]
    if check is not None and not check["passed"]:
        missed = "; ".join(m["name"] for m in check["missed"])
        lines.append(
            f"accuracy: none: the judge {check['judge']} failed its sanity check on "
            f"{len(check['missed'])} of {check['pairs']} pairs ({missed}), so no answer was judged"
        )
    elif acc:
        cats = ", ".join(
            f"{k} {v['accuracy']:.3f} ({v['correct']}/{v['n']})"
            for k, v in acc.items()
            if isinstance(v, dict)
        )
        passed = f"sanity check {check['pairs']}/{check['pairs']} passed" if check else "unchecked"
        lines.append(
            f"accuracy (judge {report.judge}, LoCoMo protocol, {passed}): {cats}; no verdict: "
            f"{acc['no_verdict']}; failed answers: {acc['failed']}"
        )
    return lines
