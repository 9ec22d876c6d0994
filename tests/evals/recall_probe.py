"""`python -m tests.evals.recall_probe`: LoCoMo evidence recall in one process, no broker.

The stages' own code in a row: the segmenter policy over one embedding pass, the encoder,
the indexer into a LanceDB directory, and the query service asked every question. It is
for iterating on retrieval: the ingested store is kept under `--store` (one directory per
encoder fingerprint), so a change on the query side is measured in seconds, and a change
of the encoder re-ingests. `lychee bench locomo` stays the reference: it runs the same
code through Kafka, and the two agree to within the ingest's order (checked in
docs/notes/issue25.md). The dense and hybrid raw-turn baselines answer the same questions
(`tests.evals.probe_figures`), so one run prints lychee against both, per question type
and per statement pair when the data has them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from schemas import QueryRequest, RawTurn, Segment
from schemas.records import RecordBatch
from streams.apps.collection import collect_as_a_worker
from streams.bench.harness import load_reported
from streams.bench.locomo import dump_row, evidence_line
from streams.factories import (
    adapter_of,
    make_embedder,
    make_llm_client,
    make_planner,
    open_store,
    recall_config,
    scorer_of,
)
from streams.settings import Settings
from tests.evals.probe_figures import asked, baselines, figures, result_of, summary
from workers.datasets import Conversation
from workers.embedding import Embedder
from workers.encoder.encoded import record_batch
from workers.encoder.extractive import encode_extractive
from workers.errors import DatasetError
from workers.evaluation.metrics import CATEGORIES, QuestionResult, items_within_budget
from workers.indexer.service import IndexBatch, IndexerService
from workers.query.adapter import QueryAdapter
from workers.query.errors import AdapterError
from workers.query.planner import HeuristicPlanner, Planner
from workers.query.service import QueryDeps, QueryService
from workers.segmenter.policy import SegmentPolicy, SessionState
from workers.store import EvidenceStore
from workers.tokens import count_tokens

K = 100


def _fingerprint() -> str:
    """Changes when the ingest code does: loading, the encoder, the indexer and the store."""
    root = Path(__file__).resolve().parents[2] / "workers"
    files = sorted(
        [
            *(root / "encoder").glob("*.py"),
            *(root / "indexer").glob("*.py"),
            *(root / "store").glob("*.py"),
            *(root / "text").glob("*.py"),
            root / "datasets.py",
            root / "vocabulary.py",
            root / "segmenter" / "policy.py",
            root / "segmenter" / "pieces.py",
        ]
    )
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


def segments_of(
    conv: Conversation, embedder: Embedder, settings: Settings
) -> tuple[list[Segment], list[RawTurn]]:
    """The segmenter policy over a conversation, and its raw turns with their vectors."""
    p = settings.segmenter.params
    policy = SegmentPolicy(p, p.calibration_for(embedder.model_name), count_tokens)
    exchanges = list(conv.exchanges)
    vecs = embedder.embed([ex.rendered() for ex in exchanges])
    by_id = {ex.exchange_id: v for ex, v in zip(exchanges, vecs, strict=True)}
    segments: list[Segment] = []
    turns: list[RawTurn] = []
    for session in conv.sessions:
        state = SessionState(namespace=conv.namespace, session_id=session.session_id)
        for ex in session.exchanges:
            vec = by_id[ex.exchange_id]
            segments += policy.step(state, ex, vec, 0.0).finalized
            for i, (tid, turn) in enumerate(zip(ex.turn_ids(), ex.turns, strict=True)):
                turns.append(
                    RawTurn(
                        namespace=ex.namespace,
                        session_id=ex.session_id,
                        turn_id=tid,
                        exchange_id=ex.exchange_id,
                        seq=ex.seq,
                        index=i,
                        role=turn.role,
                        speaker=turn.speaker,
                        text=turn.content,
                        image_caption=turn.image_caption,
                        session_date=ex.session_date,
                        created_at=turn.created_at,
                        embedding=np.asarray(vec, dtype=np.float32).tolist(),
                        embedding_model=embedder.model_name,
                    )
                )
        segments += policy.flush(state)
    return segments, turns


def batch_of(segment: Segment) -> RecordBatch:
    """The segment's batch as the encoder stage writes it, with the extractive encoder."""
    return record_batch(segment, encode_extractive(segment))


async def ingest(
    convs: list[Conversation], embedder: Embedder, store: EvidenceStore, settings: Settings
) -> dict[str, int]:
    """Every conversation through segmenter policy, encoder and indexer, then one tick of the
    indexer's maintenance (compaction, index refresh), which a running indexer does within
    `LYCHEE_OPTIMIZE_INTERVAL_S` of a write; records per namespace."""
    indexer = IndexerService(store, embedder)
    counts = {}
    t0 = time.perf_counter()
    for conv in convs:
        segments, turns = segments_of(conv, embedder, settings)
        batches = [batch_of(s) for s in segments]
        await indexer.write(IndexBatch(turns=turns, records=batches))
        counts[conv.namespace] = sum(len(b.records) for b in batches)
    t1 = time.perf_counter()
    await indexer.optimize(settings.store.ann_min_rows, settings.store.optimize_budget_s)
    turn_count = sum(c.turn_count for c in convs)
    print(
        f"written in {t1 - t0:.0f}s ({turn_count / (t1 - t0):.1f} turns/s), "
        f"the indexer's maintenance after it {time.perf_counter() - t1:.0f}s"
    )
    return counts


def _request(namespace: str, question: str, k: int) -> QueryRequest:
    deadline = datetime.now(UTC) + timedelta(minutes=10)
    return QueryRequest(
        correlation_id=uuid.uuid4().hex,
        namespace=namespace,
        query=question,
        k=k,
        reply_partition=0,
        deadline_ms=int(deadline.timestamp() * 1e3),
    )


def categories_of(text: str) -> frozenset[str] | None:
    """`--categories`: comma-separated names, None for all; ValueError naming an unknown one."""
    names = frozenset(c.strip() for c in text.split(",") if c.strip())
    if unknown := sorted(names - set(CATEGORIES.values())):
        known = ", ".join(sorted(CATEGORIES.values()))
        raise ValueError(f"unknown categories {', '.join(unknown)} (known: {known})")
    return names or None


async def ask(
    convs: list[Conversation],
    service: QueryService,
    k: int = K,
    dump: list[Any] | None = None,
    categories: frozenset[str] | None = None,
) -> list[QuestionResult]:
    """Every question of categories 1-4 (or of `categories`); `dump` receives each reply's
    evidence with scores."""
    out = []
    for conv in convs:
        for qa in conv.qa:
            if (category := asked(qa, categories)) is None:
                continue
            reply = await service.search(_request(conv.namespace, qa.question, k))
            items = [evidence_line(e) for e in reply.evidence]
            out.append(result_of(qa, category, items, reply.timings_ms.get("total", 0.0)))
            if dump is not None:
                dump.append(
                    dump_row(conv.namespace, qa.question, category, frozenset(qa.evidence), reply)
                )
    return out


def gold_ranks(results: list[QuestionResult]) -> dict[str, dict[str, float]]:
    """Per category, the share of gold turns first covered within the first 10 items, at
    ranks 11-30, further down, or not at all: where ranking could help and where recall must."""
    counts: dict[str, Counter[str]] = {}
    for r in results:
        first: dict[str, int] = {}
        for rank, item in enumerate(r.items):
            for t in item.turn_ids:
                first.setdefault(t, rank)
        for g in r.gold:
            at = first.get(g)
            where = "none" if at is None else "<=10" if at < 10 else "<=30" if at < 30 else "deeper"
            counts.setdefault(r.category, Counter())[where] += 1
    return {
        c: {w: round(n[w] / n.total(), 3) for w in ("<=10", "<=30", "deeper", "none")}
        for c, n in counts.items()
    }


def stored(
    convs: list[Conversation], embedder: Embedder, store_root: Path, settings: Settings
) -> tuple[EvidenceStore, dict[str, int]]:
    """The store of `convs` under `store_root` (itself when it holds one, else the directory
    of the current fingerprint, ingested first when new) and its records per namespace."""
    where = store_root if (store_root / "records.json").exists() else store_root / _fingerprint()
    marker = where / "records.json"
    if not marker.exists():
        t0 = time.perf_counter()
        store = open_store(settings, embedder, uri=str(where))
        counts = asyncio.run(ingest(convs, embedder, store, settings))
        marker.write_text(json.dumps(counts))
        print(f"ingested into {where} in {time.perf_counter() - t0:.0f}s")
    counts = json.loads(marker.read_text())
    return open_store(settings, embedder, uri=str(where), snapshots=True), counts


def run(
    data: Path,
    store_root: Path,
    conversations: list[str] | None,
    dump: Path | None = None,
    k: int = K,
    held_back: Path | None = None,
    planner: Planner | None = None,
    categories: frozenset[str] | None = None,
    with_baselines: bool = True,
) -> dict[str, Any]:
    """`held_back`: each conversation asked with the query adapter DIR/<namespace>.npz
    (`tests.evals.fit_adapter --held-back DIR`: fitted on the other conversations).
    `planner`: instead of the heuristic one (the LLM planner: one chat call a question).
    `with_baselines`: the dense and hybrid raw-turn baselines too, under "baselines"."""
    settings = Settings()
    convs, _ = load_reported(data)  # a message the contract refuses: named on stderr, left out
    if conversations:
        if missing := sorted(set(conversations) - {c.namespace for c in convs}):
            raise DatasetError(f"{data}: no conversation {', '.join(missing)}")
        convs = [c for c in convs if c.namespace in set(conversations)]
    if held_back is not None:  # before the ingest, which can take minutes
        absent = [c.namespace for c in convs if not (held_back / f"{c.namespace}.npz").is_file()]
        if absent:
            raise AdapterError(f"{held_back}: no held-back adapter for {', '.join(absent)}")
    embedder = make_embedder(settings)
    store, counts = stored(convs, embedder, store_root, settings)
    collect_as_a_worker()  # as a query worker does

    def service(adapter: QueryAdapter | None) -> QueryService:
        return QueryService(
            QueryDeps(
                store,
                embedder,
                planner or HeuristicPlanner(),
                scorer=scorer_of(settings),
                adapter=adapter,
            ),
            recall_config(settings),
        )

    t0 = time.perf_counter()
    dumped: list[Any] | None = [] if dump is not None else None  # kept only when asked for

    async def ask_all() -> list[QuestionResult]:  # one event loop: an LLM client spans it
        if held_back is None:
            return await ask(convs, service(adapter_of(settings, embedder)), k, dumped, categories)
        out = []  # each conversation's own adapter, checked against the model as a served one is
        for c in convs:
            own = settings.replaced(query={"adapter": str(held_back / f"{c.namespace}.npz")})
            out += await ask([c], service(adapter_of(own, embedder)), k, dumped, categories)
        return out

    results = asyncio.run(ask_all())
    if not results:
        raise DatasetError(f"{data}: no question with evidence to ask")
    if dump is not None:
        dump.write_text(json.dumps(dumped))
    agg = figures(results)
    agg["records_per_conversation"] = counts
    turns = sum(store.count("turns", c.namespace) for c in convs)
    agg["per_turn"] = {
        table: round(sum(store.count(table, c.namespace) for c in convs) / max(turns, 1), 2)
        for table in ("records", "nodes")
    }
    agg["gold_turn_ranks"] = gold_ranks(results)
    agg["items_in_1000_tokens"] = statistics.median(
        len(items_within_budget(r.items, 1000)) for r in results
    )
    agg["ask_seconds"] = round(time.perf_counter() - t0, 1)
    if with_baselines:
        ranked = baselines(convs, embedder, k, categories)
        agg["baselines"] = {name: figures(rs) for name, rs in ranked.items()}
    return agg


def demo() -> None:
    """`make demo`'s conversation and questions in one process: the top 3 of each."""
    import tempfile

    from streams.stack.demo import CONVERSATION, QUESTIONS
    from workers.datasets import load_jsonl

    settings = Settings()
    convs = load_jsonl(CONVERSATION)
    embedder = make_embedder(settings)
    with tempfile.TemporaryDirectory() as where:
        store = open_store(settings, embedder, uri=where)
        asyncio.run(ingest(convs, embedder, store, settings))
        service = QueryService(
            QueryDeps(
                open_store(settings, embedder, uri=where, snapshots=True),
                embedder,
                scorer=scorer_of(settings),
                adapter=adapter_of(settings, embedder),
            )
        )
        for q in QUESTIONS:
            reply = asyncio.run(service.search(_request(convs[0].namespace, q, 3)))
            print(q)
            for e in reply.evidence:
                print(f"  {e.turn_ids} {e.text[:110]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--demo", action="store_true", help="the demo's questions, top 3")
    parser.add_argument("--store", type=Path, default=Path("/tmp/lychee-recall-probe"))
    parser.add_argument("--conversations", default="")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dump", type=Path, help="every reply's evidence, as JSON")
    parser.add_argument("--k", type=int, default=K, help="items asked for per question")
    parser.add_argument(
        "--held-back-adapters",
        type=Path,
        help="ask each conversation with DIR/<namespace>.npz (fit_adapter --held-back DIR)",
    )
    parser.add_argument(
        "--categories", default="", help="only these, comma-separated (e.g. open-domain)"
    )
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="skip the dense and hybrid raw-turn baselines (they embed every turn)",
    )
    parser.add_argument(
        "--llm-planner",
        action="store_true",
        help="plan with the configured LLM (LYCHEE_LLM_BASE_URL, LYCHEE_LLM_MODEL)",
    )
    args = parser.parse_args()
    if args.demo or args.data is None:
        demo()
        return
    try:  # the request's own bounds, before an ingest that can take minutes
        _request("probe", "probe", args.k)
    except ValidationError as exc:
        parser.error(f"--k {args.k}: {exc.errors()[0]['msg']}")
    try:
        categories = categories_of(args.categories)
    except ValueError as exc:
        parser.error(f"--categories: {exc}")
    planner = None
    if args.llm_planner:
        settings = Settings()
        if (llm := make_llm_client(settings)) is None:
            parser.error("--llm-planner needs LYCHEE_LLM_BASE_URL and LYCHEE_LLM_MODEL")
        planner = make_planner(llm, settings)
    convs = [c for c in args.conversations.split(",") if c] or None
    try:
        agg = run(
            args.data,
            args.store,
            convs,
            args.dump,
            args.k,
            args.held_back_adapters,
            planner,
            categories,
            not args.no_baselines,
        )
    except (OSError, DatasetError, AdapterError) as exc:
        parser.error(str(exc))
    print("\n".join(summary(agg)))
    if args.out:
        args.out.write_text(json.dumps(agg, indent=1))


if __name__ == "__main__":
    main()
