"""What every benchmark shares: the variants and the stack to run against.

A benchmark runs against the configured stack (when `LYCHEE_KAFKA_BOOTSTRAP` is set) or
starts the embedded one in a temporary directory; `pipeline` yields the settings of
whichever it is. A variant names what it changes: the workers' environment (only possible
on the embedded stack) and the per-request retrieval ablation.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from schemas import Exchange, SegmentMode
from schemas.query import Ablation
from streams.bench.errors import BenchError
from streams.settings import Settings
from streams.stack.embedded import Stack
from workers.datasets import Conversation, Skipped, load, skipped_lines
from workers.query.presets import ABLATIONS


@dataclass(frozen=True)
class Variant:
    """One system configuration of a benchmark run (the paper's ablations)."""

    name: str
    worker_env: Mapping[str, str] = field(default_factory=dict)
    ablation: Ablation | None = None


def _variants(*variants: Variant) -> dict[str, Variant]:
    return {v.name: v for v in variants}


VARIANTS: dict[str, Variant] = _variants(
    Variant("full"),
    Variant("eager", {"LYCHEE_SEGMENTER__MODE": SegmentMode.eager.value}),
    Variant("fixed-window", {"LYCHEE_SEGMENTER__MODE": SegmentMode.fixed_window.value}),
    Variant("no-cross-context", {"LYCHEE_ENCODER_CROSS_CONTEXT": "false"}),
    *(Variant(name, ablation=name) for name in ABLATIONS),
)


def variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise BenchError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    return VARIANTS[name]


@contextlib.contextmanager
def pipeline(settings: Settings, chosen: Variant) -> Iterator[Settings]:
    """The configured stack, or an embedded one when Kafka is not configured."""
    if "bootstrap" in settings.kafka.model_fields_set:
        if chosen.worker_env:
            wanted = " ".join(f"{k}={v}" for k, v in chosen.worker_env.items())
            raise BenchError(
                f"variant {chosen.name!r} changes the workers ({wanted}): run it on the embedded "
                "stack (leave LYCHEE_KAFKA_BOOTSTRAP unset) or start the workers with that setting"
            )
        yield settings
        return
    from streams.stack.ready import launch, wait_ready

    data_dir = Path(tempfile.mkdtemp(prefix="lychee-bench-"))
    stack = Stack(data_dir)
    try:
        local = launch(stack, dict(chosen.worker_env))
        asyncio.run(wait_ready(stack, local, timeout_s=300))
        yield local
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def data_format(data: Path | str, fmt: str | None) -> str:
    """`fmt`, or by the file's name: JSON lines for a `.jsonl` file, else LoCoMo."""
    return fmt or ("jsonl" if Path(data).suffix == ".jsonl" else "locomo")


def load_reported(
    data: Path | str, fmt: str = "locomo"
) -> tuple[list[Conversation], list[Skipped]]:
    """A conversation file's conversations; each message the contract refuses is left out
    and named on stderr (a line each, then their count), so that a run goes on without it."""
    skipped: list[Skipped] = []
    conversations = load(data, fmt, skipped=skipped)
    report_skipped(skipped)
    return conversations, skipped


def report_skipped(skipped: list[Skipped]) -> None:
    for line in skipped_lines(skipped):
        click.echo(line, err=True)


def pick_conversation(
    conversations: list[Conversation], conversation: str | None, data: Path
) -> Conversation:
    """The conversation named `conversation` (a sample id or namespace), or the first."""
    if not conversations:
        raise BenchError(f"{data}: no conversation")
    if conversation is None:
        return conversations[0]
    for conv in conversations:
        if conv.namespace == conversation:
            return conv
    names = ", ".join(c.namespace for c in conversations)
    raise BenchError(f"{data}: no conversation {conversation!r}; it has {names}")


def rename_namespace(conv: Conversation, namespace: str) -> None:
    """Move a loaded conversation to another namespace (run-unique prefixes keep repeated
    runs against one stack apart)."""
    conv.namespace = namespace
    for session in conv.sessions:
        session.exchanges = renamed(session.exchanges, namespace)


def renamed(exchanges: list[Exchange], namespace: str) -> list[Exchange]:
    return [e.model_copy(update={"namespace": namespace}) for e in exchanges]


async def embedding_counts(settings: Settings, exchanges: int) -> dict[str, Any]:
    """Texts the workers' models embedded and their cache's hits, by stage, scraped from the
    live metrics endpoints (counters since each process started: run on a fresh stack)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families
    from redis.asyncio import Redis

    from streams.metrics import endpoints

    redis = Redis.from_url(settings.redis.url)
    try:
        eps = await asyncio.wait_for(endpoints(redis), timeout=10)
    finally:
        await redis.aclose()
    embedded: dict[str, float] = {}
    cache: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for ep in eps:
            try:
                text = (await http.get(ep["url"])).text
            except httpx.HTTPError:
                continue
            for fam in text_string_to_metric_families(text):
                for sample in fam.samples:
                    stage = sample.labels.get("stage", "?")
                    if sample.name == "lychee_embedding_batch_size_sum":
                        embedded[stage] = embedded.get(stage, 0) + sample.value
                    elif sample.name == "lychee_embedding_cache_total":
                        per = cache.setdefault(stage, {"hit": 0.0, "miss": 0.0})
                        per[sample.labels["result"]] += sample.value
    ingest = ("segmenter", "indexer")
    model = sum(embedded.get(s, 0) for s in ingest)
    hits = sum(cache.get(s, {}).get("hit", 0) for s in ingest)
    return {
        "model_texts": int(model),  # the ingest stages' total
        "by_stage": {k: int(v) for k, v in sorted(embedded.items())},
        "cache_by_stage": {k: {r: int(n) for r, n in v.items()} for k, v in sorted(cache.items())},
        "model_per_exchange": round(model / exchanges, 2) if exchanges else 0.0,
        "asked_per_exchange": round((model + hits) / exchanges, 2) if exchanges else 0.0,
        "cache_hit_rate": round(hits / (model + hits), 4) if model + hits else 0.0,
    }
