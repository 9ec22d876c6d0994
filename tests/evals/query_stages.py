"""`python -m tests.evals.query_stages --data FILE`: where the query service's time goes
under load, stage by stage, in one process.

The benchmark reports the service's p95 under load but not which stage spends it. This asks
every question of the data file's conversations (categories 1-4, as the probe) against the
probe's store (`tests.evals.recall_probe --store`, ingested first when absent), with
`--in-flight` requests at a time as `lychee bench locomo` sends them, and prints each stage's
milliseconds (the replies' `timings_ms`: plan, recall with its channels `recall.*` measured
inside their threads, bridge, selection, total) as p50, p95 and mean, with each stage's share
of the summed totals. Channels run in parallel threads, so their times overlap and add up to
more than `recall`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from streams.apps.collection import collect_as_a_worker
from streams.bench.harness import load_reported
from streams.factories import adapter_of, make_embedder, recall_config, scorer_of
from streams.settings import Settings
from tests.evals.probe_figures import asked
from tests.evals.recall_probe import K, _request, stored
from workers.embedding import Embedder
from workers.query.planner import HeuristicPlanner
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def split(timings: list[dict[str, float]]) -> list[str]:
    """One line per stage: p50, p95, mean and share of the summed totals, in ms."""
    names = sorted({n for t in timings for n in t}, key=lambda n: (n == "total", n))
    total = sum(t.get("total", 0.0) for t in timings) or 1.0
    lines = [f"{'stage':22s} {'n':>5s} {'p50':>8s} {'p95':>8s} {'mean':>8s} {'share':>6s}"]
    for name in names:
        ms = [t[name] for t in timings if name in t]
        share = sum(ms) / total
        lines.append(
            f"{name:22s} {len(ms):5d} {statistics.median(ms):8.1f} {percentile(ms, 0.95):8.1f} "
            f"{statistics.fmean(ms):8.1f} {share:6.1%}"
        )
    return lines


async def ask_all(
    service: QueryService, questions: list[tuple[str, str]], k: int, in_flight: int
) -> list[dict[str, float]]:
    bound = asyncio.Semaphore(in_flight)

    async def one(namespace: str, question: str) -> dict[str, float]:
        async with bound:
            reply = await service.search(_request(namespace, question, k))
            return dict(reply.timings_ms)

    return await asyncio.gather(*(one(ns, q) for ns, q in questions))


def serving(settings: Settings, embedder: Embedder, store: EvidenceStore) -> QueryService:
    """The query service as configured, with the heuristic planner (no LLM)."""
    deps = QueryDeps(
        store,
        embedder,
        HeuristicPlanner(),
        scorer=scorer_of(settings),
        adapter=adapter_of(settings, embedder),
    )
    return QueryService(deps, recall_config(settings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--store", type=Path, default=Path("/tmp/lychee-recall-probe"))
    parser.add_argument("--k", type=int, default=K)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1, help="times every question is asked")
    args = parser.parse_args()
    settings = Settings()
    convs, _ = load_reported(args.data)
    embedder = make_embedder(settings)
    store, _ = stored(convs, embedder, args.store, settings)
    collect_as_a_worker()
    service = serving(settings, embedder, store)
    questions = [
        (c.namespace, qa.question) for c in convs for qa in c.qa if asked(qa, None) is not None
    ]
    t0 = time.perf_counter()
    timings: list[dict[str, float]] = []
    for _ in range(args.rounds):
        timings += asyncio.run(ask_all(service, questions, args.k, args.in_flight))
    spent = time.perf_counter() - t0
    print(
        f"{len(timings)} questions, k={args.k}, {args.in_flight} in flight, "
        f"{embedder.model_name}: {spent:.1f}s, {len(timings) / spent:.1f} questions/s"
    )
    for line in split(timings):
        print(line)


if __name__ == "__main__":
    main()
