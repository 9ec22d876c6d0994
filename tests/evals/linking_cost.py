"""`python -m tests.evals.linking_cost --store DIR`: what the supersession rules cost the
indexer per record batch, read over a probe's store (`recall_probe --store`).

Each segment's records stand for one batch. For each, the links are found twice: as the
indexer finds them (the batch's records and those about the same subject, the common words
from a sample) and over every record of the namespace (how it was found before), timed,
and the two sets of links compared. Prints figures; asserts nothing.

`--copies N` measures a larger namespace too: in a scratch copy of the store, every
namespace's records written N times more under one namespace (`many`), ids and sessions
suffixed per copy, its indexes folded in; the store itself is not changed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from schemas.records import MemoryRecord, RecordBatch
from schemas.supersession import Supersession
from streams.factories import open_store
from streams.settings import Settings
from workers.indexer import linking
from workers.indexer.supersession import link_statements
from workers.store import EvidenceStore
from workers.store.records import statements


def every_record(store: EvidenceStore, batch: RecordBatch) -> list[Supersession]:
    """The links touching `batch` found over all of its namespace's records."""
    new = {r.record_id for r in batch.records}
    rows = statements(store.db, batch.namespace, linking.MAX_STATEMENTS)
    firsts = {(r["source_session"], (r["evidence"] or [""])[0]) for r in rows}
    seqs = store.turns.seqs(batch.namespace, firsts)
    said = [linking._statement(r, seqs) for r in rows]
    found = link_statements(batch.namespace, said)
    return [x for x in found if x.older_id in new or x.newer_id in new]


def batches_of(store: EvidenceStore, namespace: str, limit: int) -> list[RecordBatch]:
    rows = statements(store.db, namespace, linking.MAX_STATEMENTS)
    by_segment: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_segment[r["segment_id"] or ""].append(r["id"])
    segments = sorted(by_segment)[:limit]
    return [
        RecordBatch.model_construct(
            namespace=namespace,
            records=[MemoryRecord.model_construct(record_id=i) for i in by_segment[s]],
            supersessions=[],
        )
        for s in segments
    ]


MANY = "many"


def grown(store_dir: Path, copies: int, scratch: Path) -> Path:
    """A copy of the store at `scratch` whose namespace `MANY` holds every record `copies`
    times (each copy its own ids and sessions, so nothing merges)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    shutil.copytree(store_dir, scratch)
    store = open_store(Settings(), None, uri=str(scratch))
    tbl = store.table("records")
    assert tbl is not None
    data = tbl.to_arrow()
    for n in range(copies):
        tag = pa.scalar(f"-c{n}")
        part = data.set_column(
            data.schema.get_field_index("namespace"),
            "namespace",
            pa.array([MANY] * data.num_rows),
        )
        for col in ("id", "source_session", "segment_id"):
            i = part.schema.get_field_index(col)
            part = part.set_column(i, col, pc.binary_join_element_wise(part[col], tag, ""))
        tbl.add(part)
    tbl.optimize()
    return scratch


def key(links: list[Supersession]) -> set[tuple[str, str, str]]:
    return {(x.kind.value, x.older_id, x.newer_id) for x in links}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--batches", type=int, default=1_000, help="per namespace at most")
    parser.add_argument("--copies", type=int, default=0, help="measure a namespace this big")
    args = parser.parse_args()
    if args.copies:
        with tempfile.TemporaryDirectory() as tmp:
            where = grown(args.store, args.copies, Path(tmp) / "store")
            measure(where, args.batches, [MANY])
    else:
        measure(args.store, args.batches, None)


def measure(where: Path, limit: int, only: list[str] | None) -> None:
    store = open_store(Settings(), None, uri=str(where))
    tbl = store.table("records")
    assert tbl is not None, f"no records table in {where}"
    namespaces = only or sorted(set(tbl.to_arrow().column("namespace").to_pylist()))
    before: list[float] = []
    after: list[float] = []
    same = differ = links_before = links_after = 0
    for ns in namespaces:
        for batch in batches_of(store, ns, limit):
            t0 = time.perf_counter()
            old = every_record(store, batch)
            t1 = time.perf_counter()
            new = linking.links_of(store, [batch])
            t2 = time.perf_counter()
            before.append((t1 - t0) * 1e3)
            after.append((t2 - t1) * 1e3)
            links_before += len(old)
            links_after += len(new)
            same, differ = (same + 1, differ) if key(old) == key(new) else (same, differ + 1)
        print(f"{ns}: {store.count('records', ns)} records")
    for name, ms in (("every record (before)", before), ("by subject (after)", after)):
        print(
            f"{name:<22} batches {len(ms)}  ms per batch: median {statistics.median(ms):.1f}"
            f"  mean {statistics.fmean(ms):.1f}  max {max(ms):.1f}"
        )
    print(f"links touching the batches: before {links_before}, after {links_after}")
    print(f"batches with the same links: {same}, with other links: {differ}")


if __name__ == "__main__":
    main()
