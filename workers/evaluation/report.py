"""The benchmark reports: their JSON shape, validation, and the table printed with them.

The models pin the keys downstream tools read (plots, comparisons between runs); extra
keys are kept, never dropped, so a newer report still loads in an older reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.errors import ContractError
from workers.evaluation.metrics import CATEGORY_ORDER

LOCOMO_SCHEMA = "lychee.bench.locomo/1"
LONGMEMEVAL_SCHEMA = "lychee.bench.longmemeval/1"
LONGMEMEVAL_KS = (1, 3, 5, 10, 30, 50)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", validate_by_name=True, validate_by_alias=True)


def _check_categories(value: dict[str, Any]) -> dict[str, Any]:
    missing = [c for c in CATEGORY_ORDER if c not in value]
    if missing:
        raise ValueError(f"missing categories {missing}")
    return value


def _check_by_category(value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    _check_categories(value)
    return _check_rows(value)


def _check_rows(value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    for cat, row in value.items():
        if not row or not all(key.isdigit() for key in row):
            raise ValueError(f"{cat}: expected cut-offs such as '5' or '1000' (got {list(row)})")
        if not all(0.0 <= v <= 1.0 for v in row.values()):
            raise ValueError(f"{cat}: recall outside [0, 1]")
    return value


class Percentiles(_Model):
    p50: float
    p95: float


class KindFigures(_Model):
    """Recall per question type, for data that types its questions: each table has a row
    per type in `counts`."""

    recall_at_k: dict[str, dict[str, float]]
    hit_at_k: dict[str, dict[str, float]]
    recall_at_budget: dict[str, dict[str, float]]
    counts: dict[str, int]

    @field_validator("recall_at_k", "hit_at_k", "recall_at_budget")
    @classmethod
    def _rows(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return _check_rows(value)

    @model_validator(mode="after")
    def _same_types(self) -> KindFigures:
        for name in ("recall_at_k", "hit_at_k", "recall_at_budget"):
            if set(getattr(self, name)) != set(self.counts):
                raise ValueError(f"{name}: types differ from those counted ({list(self.counts)})")
        return self


class PairCount(_Model):
    """`n` of the `of` questions naming two statements pass a check within the top `k`."""

    n: int = Field(ge=0)
    of: int = Field(ge=1)
    k: int = Field(ge=1)

    @model_validator(mode="after")
    def _n_of(self) -> PairCount:
        if self.n > self.of:
            raise ValueError(f"n {self.n} exceeds of {self.of}")
        return self


class SystemReport(_Model):
    """One retriever's numbers: recall by count and by budget, latency, accuracy if judged."""

    recall_at_k: dict[str, dict[str, float]]
    recall_at_budget: dict[str, dict[str, float]]
    latency_ms: Percentiles
    accuracy: dict[str, float] | None
    # any-hit recall@k (a question counts when any gold turn is covered); absent in reports
    # written before it was measured
    hit_at_k: dict[str, dict[str, float]] | None = None
    # per question type, when the data types its questions
    by_kind: KindFigures | None = None
    # by check of `workers.evaluation.pairs` ("newer_first", "both_covered"), when the data
    # names the turns behind two statements
    pairs: dict[str, PairCount] | None = None

    @field_validator("recall_at_k", "recall_at_budget")
    @classmethod
    def _recall_categories(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return _check_by_category(value)

    @field_validator("accuracy")
    @classmethod
    def _accuracy_categories(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return None if value is None else _check_categories(value)


class Construction(_Model):
    segments: int
    encoder_calls: int
    turns_per_segment: float
    llm_input_tokens: int
    llm_output_tokens: int
    prompt_tokens_estimate: int
    eager_prompt_tokens_estimate: int


class QueryCost(_Model):
    llm_calls_per_question: float
    llm_tokens_per_question: float


class Ingest(_Model):
    exchanges: int
    seconds: float
    exchanges_per_second: float
    searchable_lag_ms: Percentiles
    embeddings: dict[str, Any] | None = None  # texts embedded and cache hits, by stage


class LocomoReport(_Model):
    """`lychee bench locomo` output; `schema` is aliased because BaseModel owns the name."""

    schema_: Literal["lychee.bench.locomo/1"] = Field(alias="schema")
    data: str
    variant: str
    llm: str | None
    judge: str | None = None  # the model that graded the answers, when they were judged
    # its sanity check (`workers.evaluation.judge_check`): accuracy counts only when passed
    judge_check: dict[str, Any] | None = None
    # answers that failed (refused, timed out, empty): wrong, never judged
    failed_answers: list[dict[str, Any]] | None = None
    embedding: str
    conversations: int
    turns: int
    questions: int
    systems: dict[str, SystemReport]
    construction: Construction
    query: QueryCost
    ingest: Ingest
    notes: list[str] = Field(default_factory=list)
    counts: dict[str, int] | None = None
    seconds: float | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON form, with `schema` under its real name."""
        return self.model_dump(mode="json", by_alias=True)


class LongMemEvalReport(_Model):
    """`lychee bench longmemeval` output: averaged official retrieval metrics per level.

    `metrics["turn"]` is empty when the ranking was over sessions (no turn ranks).
    """

    schema_: Literal["lychee.bench.longmemeval/1"] = Field(alias="schema")
    data: str
    granularity: Literal["session", "turn"]
    questions: int
    skipped_abstention: int
    metrics: dict[Literal["session", "turn"], dict[str, float]]
    notes: list[str] = Field(default_factory=list)
    seconds: float | None = None

    @field_validator("metrics")
    @classmethod
    def _has_session(
        cls, value: dict[Literal["session", "turn"], dict[str, float]]
    ) -> dict[Literal["session", "turn"], dict[str, float]]:
        if "session" not in value:
            raise ValueError("missing the 'session' level")
        return value

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def validate_report(data: dict[str, Any]) -> LocomoReport:
    """Parse a LoCoMo report; raises ContractError naming each bad or missing field."""
    try:
        return LocomoReport.model_validate(data)
    except ValidationError as exc:
        raise ContractError.from_validation("LoCoMo report", exc) from exc


def validate_longmemeval_report(data: dict[str, Any]) -> LongMemEvalReport:
    try:
        return LongMemEvalReport.model_validate(data)
    except ValidationError as exc:
        raise ContractError.from_validation("LongMemEval report", exc) from exc


# Tables ---------------------------------------------------------------------------------


def _num_keys(row: dict[str, float]) -> list[str]:
    return sorted(row, key=int)


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*header), *(fmt.format(*r) for r in rows)]


def _pick(keys: list[str], wanted: str) -> str:
    """`wanted` if the run measured it, else the middle cut-off."""
    return wanted if wanted in keys else keys[len(keys) // 2]


def format_table(report: LocomoReport) -> str:
    """The human summary: headline recall, per-category recall, then costs."""
    systems = report.systems
    if not systems:
        return "no systems evaluated"
    first = next(iter(systems.values()))
    ks = _num_keys(first.recall_at_k["all"])
    bs = _num_keys(first.recall_at_budget["all"])
    hits = [k for k in ("5", "10") if first.hit_at_k and k in first.hit_at_k["all"]]
    header = ["system", *(f"R@{k}" for k in ks), *(f"R@{b}tok" for b in bs)]
    header += [f"hit@{k}" for k in hits]
    rows = [
        [
            name,
            *(f"{s.recall_at_k['all'].get(k, 0.0):.3f}" for k in ks),
            *(f"{s.recall_at_budget['all'].get(b, 0.0):.3f}" for b in bs),
            *(f"{(s.hit_at_k or {}).get('all', {}).get(k, 0.0):.3f}" for k in hits),
        ]
        for name, s in systems.items()
    ]
    lines = [
        f"{report.data} ({report.variant}): {report.questions} questions, "
        f"{report.conversations} conversations, {report.turns} turns, "
        f"embedding {report.embedding}",
        "",
        *_grid(header, rows),
    ]

    counts = report.counts or {}
    cats = list(CATEGORY_ORDER)
    cat_header = ["system", *(f"{c} (n={counts[c]})" if c in counts else c for c in cats)]
    blocks: list[tuple[str, str, str]] = [
        (f"recall@{_pick(ks, '10')} by category", "recall_at_k", _pick(ks, "10")),
        (f"recall@{_pick(bs, '1000')} tokens by category", "recall_at_budget", _pick(bs, "1000")),
    ]
    if hits:
        k = "10" if "10" in hits else hits[-1]
        blocks.insert(1, (f"hit@{k} by category", "hit_at_k", k))
    for title, attr, cut in blocks:
        rows = [[name, *_cells(getattr(s, attr), cats, cut)] for name, s in systems.items()]
        lines += ["", title, *_grid(cat_header, rows)]

    lines += kind_lines(systems)
    if pairs := pair_lines(systems):
        lines += ["", *pairs]
    lines += ["", *_cost_lines(report, cats)]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def _cells(table: dict[str, dict[str, float]] | None, rows: list[str], cut: str) -> list[str]:
    """One figure per row at `cut`; "-" throughout for a figure the report does not hold."""
    if table is None:
        return ["-"] * len(rows)
    return [f"{table.get(r, {}).get(cut, 0.0):.3f}" for r in rows]


def kind_lines(systems: Mapping[str, SystemReport]) -> list[str]:
    """Per question type, one block per figure: a row per type, a column per system."""
    typed = {n: s.by_kind for n, s in systems.items() if s.by_kind and s.by_kind.counts}
    if not typed:
        return []
    first = next(iter(typed.values()))
    kinds = list(first.counts)
    k = _pick(_num_keys(first.recall_at_k[kinds[0]]), "10")
    b = _pick(_num_keys(first.recall_at_budget[kinds[0]]), "1000")
    blocks = (
        (f"recall@{k} by question type", "recall_at_k", k),
        (f"hit@{k} by question type", "hit_at_k", k),
        (f"recall@{b} tokens by question type", "recall_at_budget", b),
    )
    lines: list[str] = []
    for title, attr, cut in blocks:
        rows = [
            [
                kind,
                str(first.counts[kind]),
                *(f"{getattr(f, attr).get(kind, {}).get(cut, 0.0):.3f}" for f in typed.values()),
            ]
            for kind in kinds
        ]
        lines += ["", title, *_grid(["type", "n", *typed], rows)]
    return lines


PAIR_TITLES = {
    "newer_first": "knowledge updates, the newer value in the top {k} above the older",
    "both_covered": "contradictions, both statements in the top {k}",
}


def pair_lines(systems: Mapping[str, SystemReport]) -> list[str]:
    """One line per check of two named statements: each system's "n of N"."""
    lines = []
    for check, title in PAIR_TITLES.items():
        counts = {
            name: s.pairs[check] for name, s in systems.items() if s.pairs and check in s.pairs
        }
        if counts:
            k = next(iter(counts.values())).k
            lines.append(
                f"{title.format(k=k)}: "
                + "; ".join(f"{name} {c.n} of {c.of}" for name, c in counts.items())
            )
    return lines


def _cost_lines(report: LocomoReport, cats: list[str]) -> list[str]:
    """Latency, accuracy, construction, query and ingest costs of a report."""
    systems = report.systems
    lines: list[str] = []
    lines.append(
        "latency ms: "
        + "; ".join(
            f"{n} p50 {s.latency_ms.p50:.1f} p95 {s.latency_ms.p95:.1f}" for n, s in systems.items()
        )
    )
    judged = {n: s.accuracy for n, s in systems.items() if s.accuracy is not None}
    if not judged:
        why = "no LLM configured" if report.llm is None else "answers are not judged"
        lines.append(f"accuracy: n/a ({why})")
    check = report.judge_check
    passed = (
        f", sanity check {check['pairs']}/{check['pairs']} passed"
        if check and check["passed"]
        else ""
    )
    by = f" (judge {report.judge}, LoCoMo protocol{passed})" if report.judge else ""
    if check and not check["passed"]:
        names = "; ".join(m["name"] for m in check["missed"])
        lines.append(f"judge {check['judge']} FAILED its sanity check on: {names}")
    if report.failed_answers:
        lines.append(f"failed answers (wrong, never judged): {len(report.failed_answers)}")
    for name, acc in judged.items():
        lines.append(
            f"accuracy {name}{by}: " + ", ".join(f"{c} {acc[c]:.3f}" for c in cats if c in acc)
        )
    con, q, i = report.construction, report.query, report.ingest
    lines.append(
        f"construction: {con.segments} segments, {con.encoder_calls} encoder calls, "
        f"{con.turns_per_segment:.2f} turns/segment, LLM tokens {con.llm_input_tokens} in / "
        f"{con.llm_output_tokens} out, prompt estimate {con.prompt_tokens_estimate} "
        f"(eager {con.eager_prompt_tokens_estimate})"
    )
    lines.append(
        f"query: {q.llm_calls_per_question:.2f} LLM calls and "
        f"{q.llm_tokens_per_question:.0f} tokens per question (llm: {report.llm or 'none'})"
    )
    lines.append(
        f"ingest: {i.exchanges} exchanges in {i.seconds:.1f} s "
        f"({i.exchanges_per_second:.1f}/s), searchable lag p50 {i.searchable_lag_ms.p50:.0f} ms "
        f"p95 {i.searchable_lag_ms.p95:.0f} ms"
    )
    if i.embeddings:
        e = i.embeddings
        lines.append(
            f"embeddings: {e['model_per_exchange']} per exchange by the model, "
            f"{e['asked_per_exchange']} asked (cache hit rate {e['cache_hit_rate']:.1%}); "
            f"by stage {e['by_stage']}, cache {e['cache_by_stage']}"
        )
    return lines


def format_longmemeval_table(report: LongMemEvalReport) -> str:
    """One row per level, recall_any / recall_all / ndcg_any across the cut-offs."""
    lines = [
        f"{report.data}: {report.questions} questions ({report.skipped_abstention} abstention "
        f"skipped), ranked {report.granularity}s"
    ]
    for level, values in report.metrics.items():
        if not values:
            continue
        ks = sorted({int(key.split("@")[1]) for key in values})
        rows = [
            [metric, *(f"{values.get(f'{metric}@{k}', 0.0):.3f}" for k in ks)]
            for metric in ("recall_any", "recall_all", "ndcg_any")
        ]
        lines += ["", f"{level} level", *_grid(["metric", *(f"@{k}" for k in ks)], rows)]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
