"""`python -m tests.evals.embedded_texts --data FILE`: which texts each ingest stage gives
the embedding model, per exchange, in one process.

The stages' own code in a row, as `tests.evals.recall_probe` ingests (the segmenter's one
embedding pass, the extractive encoder, the indexer one segment at a time as the stack
writes), through the stages' cached embedder (`streams.factories.make_embedder`). Each call
is tagged by who makes it: the segmenter, the indexer's records, the indexer's nodes (split
into event frames, entity/topic pairs and single labels by their form). Printed per kind:
texts asked, texts the model computed (cache misses), model seconds; and how many of the
indexer's texts equal one the segmenter embedded, the texts a vector carried from the
segmenter could spare.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from streams.bench.harness import load_reported
from streams.factories import make_embedder, open_store
from streams.settings import Settings
from tests.evals.recall_probe import batch_of, segments_of
from workers.embedding import Matrix
from workers.indexer.service import IndexBatch, IndexerService


def node_kind(text: str) -> str:
    """An event frame's text starts with its label, `session S, turns A–B`; a pair's label
    is `entity / topic`."""
    if text.startswith("session ") and ", turns " in text:
        return "nodes: event frames"
    return "nodes: pairs" if " / " in text else "nodes: labels"


class Tally:
    """Wraps the cached embedder: every call counted under the current tag."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.tag = "segmenter"
        self.asked: Counter[str] = Counter()
        self.computed: Counter[str] = Counter()
        self.seconds: dict[str, float] = {}
        self.texts: dict[str, list[str]] = {}

    def embed(self, texts: list[str]) -> Matrix:
        before, t0 = self.inner.misses, time.perf_counter()
        out: Matrix = self.inner.embed(texts)
        self.seconds[self.tag] = self.seconds.get(self.tag, 0.0) + time.perf_counter() - t0
        self.asked[self.tag] += len(texts)
        self.computed[self.tag] += self.inner.misses - before
        self.texts.setdefault(self.tag, []).extend(texts)
        if self.tag == "indexer: nodes":
            self.asked.update(node_kind(t) for t in texts)
        return out


class _Tagged(IndexerService):
    """The indexer, its records' and nodes' embedding calls told apart: records are
    embedded by the records table's write, before the nodes (workers.store.upsert_batches)."""

    def __init__(self, store: Any, tally: Tally) -> None:
        super().__init__(store, tally)
        self.tally = tally
        for table, tag in ((store.records, "indexer: records"), (store.nodes, "indexer: nodes")):
            upsert = table.upsert

            def tagged(items: Any, embedder: Any, _u: Any = upsert, _t: str = tag) -> int:
                self.tally.tag = _t
                return int(_u(items, embedder))

            table.upsert = tagged


def count(data: Path, conversations: int | None) -> tuple[int, Tally]:
    settings = Settings()
    convs, _ = load_reported(data)
    convs = convs[:conversations] if conversations else convs
    tally = Tally(make_embedder(settings))
    with tempfile.TemporaryDirectory(prefix="lychee-embedded-texts-") as where:
        indexer = _Tagged(open_store(settings, tally, uri=where), tally)
        for conv in convs:
            tally.tag = "segmenter"
            segments, turns = segments_of(conv, tally, settings)
            asyncio.run(indexer.write(IndexBatch(turns=turns)))
            for segment in segments:
                asyncio.run(indexer.write(IndexBatch(records=[batch_of(segment)])))
    return sum(len(list(c.exchanges)) for c in convs), tally


def lines(exchanges: int, tally: Tally) -> list[str]:
    out = [f"{exchanges} exchanges, {tally.model_name}; per exchange:"]
    out.append(f"{'':22s} {'asked':>7s} {'computed':>9s} {'model s':>8s}")
    for kind in sorted(tally.asked):
        computed = f"{tally.computed[kind] / exchanges:9.2f}" if kind in tally.computed else ""
        seconds = f"{tally.seconds[kind]:8.1f}" if kind in tally.seconds else ""
        out.append(f"{kind:22s} {tally.asked[kind] / exchanges:7.2f} {computed:9s} {seconds}")
    segmenter = set(tally.texts.get("segmenter", []))
    indexer = [t for tag, ts in tally.texts.items() if tag.startswith("indexer") for t in ts]
    same = sum(t in segmenter for t in indexer)
    out.append(f"indexer texts equal to a segmenter text: {same} of {len(indexer)}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--conversations", type=int, help="the first N only")
    args = parser.parse_args()
    for line in lines(*count(args.data, args.conversations)):
        print(line)


if __name__ == "__main__":
    main()
