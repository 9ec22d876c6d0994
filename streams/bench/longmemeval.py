"""`lychee bench longmemeval`: the official retrieval metrics through the real pipeline.

Each instance's haystack is ingested through Kafka as its own namespace; each question
(abstention questions skipped) goes through request/reply and the provenance of the
returned evidence, in order, is the ranking that the official metrics score.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from pathlib import Path

from tqdm import tqdm

from streams.bench.harness import VARIANTS, pipeline, report_skipped
from streams.client import MemoryClient
from streams.kafka.lag import LagReader
from streams.settings import Settings
from workers.datasets import Skipped
from workers.evaluation.longmemeval import (
    Granularity,
    LongMemEvalInstance,
    build_longmemeval_report,
    evaluate_rankings,
    load_longmemeval,
)
from workers.evaluation.report import LONGMEMEVAL_KS, LongMemEvalReport

RETRIEVE_K = max(LONGMEMEVAL_KS)


def run_longmemeval(
    settings: Settings, data: Path, granularity: Granularity = "turn", progress: bool = True
) -> LongMemEvalReport:
    started = time.perf_counter()
    prefix = f"b{uuid.uuid4().hex[:6]}-"
    skipped: list[Skipped] = []
    instances = [_prefixed(i, prefix) for i in load_longmemeval(data, skipped)]
    report_skipped(skipped)
    with pipeline(settings, VARIANTS["full"]) as live:
        rows = asyncio.run(_run(live, instances, granularity, progress))
    return build_longmemeval_report(
        str(data),
        granularity,
        rows,
        seconds=round(time.perf_counter() - started, 1),
        skipped=[s.as_dict() for s in skipped],
    )


def _prefixed(inst: LongMemEvalInstance, prefix: str) -> LongMemEvalInstance:
    ns = (prefix + inst.namespace)[:128]
    exchanges = [e.model_copy(update={"namespace": ns}) for e in inst.exchanges]
    return dataclasses.replace(inst, namespace=ns, exchanges=exchanges)


async def _run(
    settings: Settings,
    instances: list[LongMemEvalInstance],
    granularity: Granularity,
    progress: bool,
) -> list[tuple[str, dict[str, dict[str, float]]]]:
    async with MemoryClient(settings) as client:
        total = sum(len(i.exchanges) for i in instances)
        bar = tqdm(total=total, unit="ex", desc="ingest", disable=not progress, leave=False)
        for inst in instances:
            await client.add(inst.exchanges)
            for sid in inst.session_ids:
                await client.end_session(inst.namespace, sid)
            bar.update(len(inst.exchanges))
        bar.close()
        async with LagReader(settings.kafka.bootstrap) as lag:
            await lag.wait_drained(timeout_s=3600)
        rows = []
        asked = [i for i in instances if not i.abstention]
        for inst in tqdm(asked, unit="q", desc="questions", disable=not progress, leave=False):
            reply = await client.search(inst.namespace, inst.question, k=RETRIEVE_K, timeout_s=60)
            ranked = [tid for item in reply.evidence for tid in item.turn_ids]
            if granularity == "session":
                sessions = list(dict.fromkeys(inst.turn_session.get(t, t) for t in ranked))
                rows.append((inst.question_id, evaluate_rankings(inst, sessions, "session")))
            else:
                rows.append((inst.question_id, evaluate_rankings(inst, ranked, "turn")))
        rows += [(i.question_id, {}) for i in instances if i.abstention]
    return rows
