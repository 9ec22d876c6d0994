"""`python -m tests.evals.first_questions --data FILE`: what a namespace's first question
waits for, against a warm one (and, asked for, one after a write).

The query service keeps each small namespace in memory (workers.store.snapshots); the first
question after a start, or after a write to the namespace, reads the namespace's three
searched tables and builds their full-text indexes before it searches. That load sets the
tail of the recall probe's latency (ten namespaces' first questions among 179 on BEAM dev).
Each round opens the probe's store afresh (`tests.evals.recall_probe --store`, ingested first
when absent) and, per conversation, times the load alone (`EvidenceStore.warmers`, run at
once as a request runs them), then in another fresh store the conversation's first question
cold and its second question warm. With `--after-write` (on a copy of the store) each
conversation's last exchange is then written to it again as a new session, through the
segmenter policy, encoder and indexer as the probe ingests, and its third question is timed:
the question of an agent that asks after it speaks. It prints each figure's median and p95
over conversations and rounds, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from streams.apps.collection import collect_as_a_worker
from streams.bench.harness import load_reported
from streams.factories import make_embedder, open_store
from streams.settings import Settings
from tests.evals.probe_figures import asked
from tests.evals.query_stages import percentile, serving
from tests.evals.recall_probe import K, _request, ingest, stored
from workers.datasets import Conversation, Session
from workers.embedding import embed_queries
from workers.query.service import QueryService
from workers.store import EvidenceStore


async def load(store: EvidenceStore, namespace: str) -> float:
    """Milliseconds to read and index the namespace's searched tables, all at once."""
    t0 = time.perf_counter()
    await asyncio.gather(*(asyncio.to_thread(w) for w in store.warmers(namespace)))
    return (time.perf_counter() - t0) * 1e3


async def answered(
    service: QueryService, namespace: str, questions: list[str], k: int
) -> list[float]:
    """Each question's milliseconds in the service, asked in turn."""
    out = []
    for question in questions:
        t0 = time.perf_counter()
        await service.search(_request(namespace, question, k))
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def first_questions(convs: list[Conversation], n: int = 2) -> dict[str, list[str]]:
    """Each conversation's first `n` questions the probe asks, by namespace."""
    return {c.namespace: [qa.question for qa in c.qa if asked(qa, None)][:n] for c in convs}


def written_again(conv: Conversation, session_id: str) -> Conversation:
    """The conversation's last exchange alone, in a new session of the same namespace."""
    last = conv.sessions[-1]
    exchange = last.exchanges[-1].model_copy(update={"session_id": session_id, "seq": 0})
    return Conversation(conv.namespace, [Session(session_id, last.date, [exchange])])


def summary(name: str, ms: list[float]) -> str:
    return f"{name:16s} n={len(ms):3d} p50 {statistics.median(ms):7.1f} p95 {percentile(ms, 0.95):7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--store", type=Path, default=Path("/tmp/lychee-recall-probe"))
    parser.add_argument("--k", type=int, default=K)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--after-write", action="store_true", help="also a question after a write (a store copy)"
    )
    args = parser.parse_args()
    settings = Settings()
    convs, _ = load_reported(args.data)
    embedder = make_embedder(settings)
    first = first_questions(convs, 3 if args.after_write else 2)
    uri = stored(convs, embedder, args.store, settings)[0].db.uri  # ingested when new
    copy = Path(tempfile.mkdtemp(prefix="lychee-first-questions-")) if args.after_write else None
    if copy is not None:
        shutil.copytree(uri, copy / "store")
        uri = str(copy / "store")
    collect_as_a_worker()
    embed_queries(embedder, ["a first call loads the model"])  # no question pays for it
    figures: dict[str, list[float]] = {"load alone": [], "first question": [], "second, warm": []}
    try:
        for r in range(args.rounds):
            store = open_store(settings, embedder, uri=uri, snapshots=True)
            figures["load alone"] += [asyncio.run(load(store, ns)) for ns in first]
            service = serving(
                settings, embedder, open_store(settings, embedder, uri=uri, snapshots=True)
            )
            for conv in convs:
                ns, asking = conv.namespace, first[conv.namespace]
                if not asking:
                    continue
                cold, *warm = asyncio.run(answered(service, ns, asking[:2], args.k))
                figures["first question"].append(cold)
                figures["second, warm"] += warm
                if copy is not None and asking[2:]:
                    writer = open_store(settings, embedder, uri=uri)
                    with contextlib.redirect_stdout(io.StringIO()):  # its "written in" line
                        asyncio.run(
                            ingest([written_again(conv, f"again-{r}")], embedder, writer, settings)
                        )
                    after = asyncio.run(answered(service, ns, asking[2:], args.k))
                    figures.setdefault("after a write", []).extend(after)
    finally:
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)
    print(f"{len(first)} namespaces, {args.rounds} rounds, k={args.k}, {embedder.model_name}")
    for name, ms in figures.items():
        print(summary(name, ms) if ms else f"{name:16s} n=  0")


if __name__ == "__main__":
    main()
