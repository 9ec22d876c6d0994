"""Scale-out: the rows do not depend on how many processes run each ingest stage (DESIGN §9).

One stack of its own (a second member joining would rebalance the shared fixture's groups):
the same conversation goes in once with one process per stage (segmenter, encoder, indexer),
then under other namespaces with two and with three processes per stage. The offline encoder is
deterministic, so the turns, the records with their provenance and the nodes with their links
must come out identical; vectors are left out (MiniLM's vary slightly with batch composition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from streams.bench.chaos import synthetic
from streams.factories import embedding_info
from streams.kafka.topics import ensure_topics
from streams.settings import Settings
from streams.stack.embedded import Stack
from tests.conftest import READY, wait_log
from tests.streams.test_pipeline import ingest
from workers.store import NODES, RECORDS, TURNS, EvidenceStore, lineage, namespace_filter

# Six worker processes start and load their models: on a busy 2-core machine that alone can
# take minutes, hence the longer time limit.
pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.timeout(900)]

STAGES = ("segmenter", "encoder", "indexer")
ENV = {
    "LYCHEE_TOPIC_PARTITIONS": "6",
    "LYCHEE_SEGMENTER_BATCH_SIZE": "4",
    "LYCHEE_ENCODER_BATCH_SIZE": "2",
    "LYCHEE_INDEXER_BATCH_SIZE": "8",
    "LYCHEE_LOG_LEVEL": "INFO",
    "LYCHEE_SESSION_TIMEOUT_S": "6",
}


# Invented people and places; every session mentions the same ones, so their entity and topic
# nodes gather links from every session (the rows two writers would race on).
def _rows(store: EvidenceStore, name: str, ns: str) -> list[dict[str, Any]]:
    tbl = store.table(name)
    assert tbl is not None, f"no {name} table"
    data = tbl.search().where(namespace_filter(ns)).limit(None).to_arrow()
    # lineage holds each namespace's own offsets in the shared topic
    data = data.drop_columns([c for c in ("vector", lineage.COLUMN) if c in data.column_names])
    return [_neutral(r, ns) for r in data.to_pylist()]


def _neutral(value: Any, ns: str) -> Any:
    """`value` with the namespace replaced, so that two namespaces' rows compare."""
    if isinstance(value, str):
        return value.replace(ns, "NS")
    if isinstance(value, list):
        return [_neutral(v, ns) for v in value]
    if isinstance(value, dict):
        return {k: _neutral(v, ns) for k, v in value.items()}
    return value


def snapshot(store: EvidenceStore, ns: str) -> dict[str, Any]:
    """Turns, records (by text, with provenance) and nodes (with their links as a set)."""
    turns = sorted((r for r in _rows(store, TURNS, ns)), key=lambda r: r["id"])
    records = _rows(store, RECORDS, ns)
    text_of = {r["id"]: r["normalized_text"] for r in records}  # record ids hash the namespace
    by_text = {r.pop("normalized_text"): _provenance(r) for r in records}
    nodes = {}
    for row in _rows(store, NODES, ns):
        nodes[row["id"]] = {
            "links": sorted(text_of[rid] for rid in row["record_ids"]),
            **{
                k: row[k]
                for k in (
                    "node_type",
                    "key",
                    "session_id",
                    "first_turn_id",
                    "last_turn_id",
                    "updated_at",
                )
            },
        }
    return {"turns": [_without(r, "created_at") for r in turns], "records": by_text, "nodes": nodes}


def _provenance(row: dict[str, Any]) -> dict[str, Any]:
    out = _without(row, "id")
    for column in ("evidence", "segment_ids", "entities", "tags"):
        out[column] = sorted(out[column] or [])
    return out


def _without(row: dict[str, Any], *columns: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in columns}


@pytest.fixture
def stack(tmp_path) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    s = Stack(tmp_path / "stack")
    s.start_infra()
    try:
        asyncio.run(ensure_topics(s.bootstrap, 6))
        yield s
    finally:
        s.stop(grace_s=5)


def _lines(stack: Stack, name: str, text: str) -> int:
    log = stack.logs / f"{name}.log"
    return log.read_text(errors="replace").count(text) if log.exists() else 0


def _add_members(stack: Stack, suffix: str) -> None:
    """One more member of each consumer group, with its own log, once it has partitions."""
    for stage in STAGES:
        child = stack.child(f"{stage}-{suffix}", ["worker", stage], ENV)
        child.start()
        stack.children.append(child)
    for stage in STAGES:
        wait_log(stack, f"{stage}-{suffix}", READY[stage])
        wait_log(stack, f"{stage}-{suffix}", '"stage.assigned"')


def test_scale_out_two_and_three_processes_per_stage_write_the_rows_of_one(stack: Stack) -> None:
    # fixed names: the eight sessions of each hash to all six partitions, so whichever
    # partitions each member gets, every member of every stage has work (six, not four:
    # Faust's sticky assignor leaves a third member of four partitions idle at 2/2/0)
    settings = stack.settings()
    for stage in STAGES:
        stack.start_worker(stage, ENV)
    for stage in STAGES:
        wait_log(stack, stage, READY[stage])
    asyncio.run(ingest(settings, synthetic("scale-one", sessions=8, per_session=8)))
    name, dim = embedding_info(Settings())
    store = EvidenceStore(stack.lancedb_uri, name, dim)
    one = snapshot(store, "scale-one")
    assert len(one["turns"]) == 64 and one["records"] and one["nodes"]

    encoders = ["encoder"]
    for suffix, ns in (("2", "scale-two-x"), ("3", "scale-three")):
        _add_members(stack, suffix)
        encoders.append(f"encoder-{suffix}")
        before = {e: _lines(stack, e, "segment.encoded") for e in encoders}
        asyncio.run(ingest(settings, synthetic(ns, sessions=8, per_session=8)))

        encoded = {e: _lines(stack, e, "segment.encoded") - before[e] for e in encoders}
        assert all(n > 0 for n in encoded.values()), f"an encoder had no work: {encoded}"
        many = snapshot(store, ns)
        assert many["turns"] == one["turns"], ns
        assert many["records"] == one["records"], ns
        assert many["nodes"] == one["nodes"], ns
