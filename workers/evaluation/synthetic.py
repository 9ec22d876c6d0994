"""A synthetic evidence store at production scale, for latency measurements only.

Going through the pipeline, a million records would take days of MiniLM time on two cores,
so the tables are written directly in the indexer's schemas. Texts come from templates;
each vector is the embedding of its template sentence (one embedder call per distinct
sentence) plus a little Gaussian noise, so near-duplicates are not exact duplicates and
questions embedded by the same model land near the records they ask about.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from workers.embedding import Embedder
from workers.store import NODES, RECORDS, TURNS, EvidenceStore

NAMES = [
    "Avery",
    "Blake",
    "Casey",
    "Dana",
    "Eden",
    "Finley",
    "Gray",
    "Harper",
    "Indy",
    "Jules",
    "Kai",
    "Lane",
    "Morgan",
    "Noel",
    "Oakley",
    "Parker",
    "Quinn",
    "Reese",
    "Sage",
    "Tatum",
    "Uma",
    "Vale",
    "Wren",
    "Yael",
    "Zion",
    "Arden",
    "Bellamy",
    "Corin",
    "Darcy",
    "Ellis",
]
ACTIVITIES = [
    "started a pottery class",
    "adopted a rescue dog",
    "ran a half marathon",
    "moved to a new apartment",
    "learned to play the cello",
    "planted a vegetable garden",
    "went camping with friends",
    "changed jobs to work in design",
    "visited a grandparent",
    "painted a sunset landscape",
    "joined a book club",
    "volunteered at an animal shelter",
    "baked sourdough bread",
    "bought a secondhand bicycle",
    "took a photography workshop",
    "hosted a birthday dinner",
    "signed up for swimming lessons",
    "repaired an old guitar",
    "travelled by night train",
    "organised a charity bake sale",
]
PLACES = [
    "in the city",
    "at the lake",
    "near the coast",
    "in the mountains",
    "downtown",
    "at the community centre",
    "in the old town",
    "by the river",
    "at the university",
    "in the countryside",
]
MONTHS = "January February March April May June July August September October November December"


@dataclass(frozen=True)
class SyntheticStore:
    namespaces: list[str]
    rows: dict[str, int]  # table -> rows written
    sentences: list[str]  # the template sentences, for questions about them


def sentences(limit: int) -> list[str]:
    """Distinct template sentences, deterministic, at most `limit`."""
    months = MONTHS.split()
    combos = itertools.product(NAMES, ACTIVITIES, PLACES)
    return [
        f"{n} {a} {p} in {months[i % 12]} {2020 + i % 5}"
        for i, (n, a, p) in zip(range(limit), combos, strict=False)
    ]


def build(
    store: EvidenceStore,
    embedder: Embedder,
    records: int,
    namespaces: int,
    pool: int = 2048,
    noise: float = 0.01,
    chunk: int = 50_000,
    seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> SyntheticStore:
    """`records` records, as many raw turns and half as many entity-topic nodes, spread
    evenly over `namespaces`; scalar and full-text indexes as the indexer builds them.
    ANN indexes are left to `EvidenceStore.maybe_build_ann`."""
    if records < namespaces or namespaces < 1:
        raise ValueError("need at least one record per namespace")
    rng = np.random.default_rng(seed)
    texts = sentences(pool)
    base = np.asarray(embedder.embed(texts), dtype=np.float32)
    names = [namespace(i) for i in range(namespaces)]
    written = {}
    for name, make, n in (
        (RECORDS, _records, records),
        (TURNS, _turns, records),
        (NODES, _nodes, records // 2),
    ):
        tbl = store.table(name, create=True)
        assert tbl is not None
        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            which = rng.integers(len(texts), size=size)
            vecs = base[which] + rng.normal(0.0, noise, (size, base.shape[1])).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            rows = list(make(start, which, texts, names, n))
            data = pa.Table.from_pylist(
                rows, schema=tbl.schema.remove(tbl.schema.get_field_index("vector"))
            )
            data = data.append_column(
                tbl.schema.field("vector"),
                pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), base.shape[1]),
            )
            tbl.add(data.select(tbl.schema.names))
            if progress:
                progress(name, size)
        store.db.ensure_indexes(name, tbl, store.tables[name].text_column)
        written[name] = n
    return SyntheticStore(namespaces=names, rows=written, sentences=texts)


def namespace(i: int) -> str:
    return f"syn{i:05d}"


def questions(n: int, seed: int = 0) -> list[str]:
    """Questions in the store's vocabulary: about a person, a place, or an activity."""
    rng = np.random.default_rng(seed)
    forms = (
        lambda: f"What did {rng.choice(NAMES)} do {rng.choice(PLACES)}?",
        lambda: f"Who {rng.choice(ACTIVITIES)}?",
        lambda: f"When did {rng.choice(NAMES)} and {rng.choice(NAMES)} meet {rng.choice(PLACES)}?",
    )
    return [forms[i % len(forms)]() for i in range(n)]


def _namespace(i: int, names: list[str], total: int) -> str:
    return names[i * len(names) // total]


_T0 = datetime(2023, 1, 1)


def _records(
    start: int, which: np.ndarray, texts: list[str], names: list[str], total: int
) -> Iterator[dict[str, object]]:
    for j, w in enumerate(which.tolist()):
        i = start + j
        text = texts[w]
        ns = _namespace(i, names, total)
        yield {
            "id": f"r{i:08d}",
            "namespace": ns,
            "memory_type": "fact",
            "semantic_text": text,
            "normalized_text": text.lower(),
            "context": "",
            "search_text": text.lower(),
            "entities": [text.split()[0]],
            "tags": [],
            "t_ref": None,
            "t_valid_from": None,
            "t_valid_to": None,
            "evidence": [f"t{i:08d}"],
            "source_session": f"s{i // 50}",
            "segment_id": f"g{i // 6}",
            "segment_ids": [f"g{i // 6}"],
            "source_role": "user",
            "confidence": 1.0,
            "created_at": _T0 + timedelta(minutes=i),
        }


def _turns(
    start: int, which: np.ndarray, texts: list[str], names: list[str], total: int
) -> Iterator[dict[str, object]]:
    for j, w in enumerate(which.tolist()):
        i = start + j
        ns, text = _namespace(i, names, total), texts[w]
        speaker, rest = text.split(" ", 1)
        session = f"s{i // 50}"  # sessions of 50 consecutive turns
        yield {
            "id": f"{ns}/{session}/t{i:08d}",
            "namespace": ns,
            "session_id": session,
            "turn_id": f"t{i:08d}",
            "exchange_id": f"{session}:{i}",
            "seq": i,
            "idx": 0,
            "role": "user",
            "speaker": speaker,
            "content": f"I {rest}",
            "image_caption": None,
            "text": f"{speaker}: I {rest}",
            "session_date": _T0 + timedelta(days=i % 365),
            "created_at": _T0 + timedelta(minutes=i),
            "memory": True,
        }


def _nodes(
    start: int, which: np.ndarray, texts: list[str], names: list[str], total: int
) -> Iterator[dict[str, object]]:
    records = 2 * total
    for j, w in enumerate(which.tolist()):
        i = start + j
        ns, text = _namespace(i, names, total), texts[w]
        first = 2 * i
        end = (first * len(names) // records + 1) * records // len(names)  # namespace's end
        linked = [f"r{r:08d}" for r in range(first, min(first + 8, end))]
        key = f"{text.split()[0].lower()}|{' '.join(text.split()[1:3])}"
        yield {
            "id": f"{ns}/entity_topic/{key}/{i}",
            "namespace": ns,
            "node_type": "entity_topic",
            "key": key,
            "label": key,
            "text": text,
            "record_ids": linked,
            "record_texts": [text] * len(linked),
            "session_id": f"s{first // 50}",
            "first_turn_id": f"t{first:08d}",
            "last_turn_id": f"t{first + 7:08d}",
            "updated_at": _T0 + timedelta(minutes=first),
        }
