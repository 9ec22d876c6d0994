"""In-memory BM25 of a small namespace scores as LanceDB's full-text index does, with the
namespace's own statistics."""

from __future__ import annotations

import math
import random
import string
from pathlib import Path

import bm25s
import numpy as np
import pyarrow as pa
import pytest

from tests.workers.builders import HASH_DIM, HashEmbedder
from tests.workers.store.test_forget import raw
from workers.store import EvidenceStore
from workers.store.fulltext import K1, B, TextIndex, analyze, word_by_word

TEXTS = [
    "Ann booked a trip to Lisbon and was running late",
    "Ann likes the tiled houses in Lisbon, Lisbon's trams and the river",
    "Ben adopted a grey cat; the cat sleeps all day",
    "Ben trains for a half marathon every Sunday morning",
    "Ann bakes sourdough on Sundays for her neighbours",
    "Ben's cat is called Ash and it hates the café's dog",
    "They were running along the river before the marathon",
]
QUERIES = ["Lisbon trip", "cat", "running marathon river", "Sunday sourdough", "cafe dog", "the"]


def test_analyze_splits_lowercases_stems_drops_stop_words_and_folds() -> None:
    assert analyze("Ben's CAT was running to the Café!") == ["ben", "cat", "run", "cafe"]
    assert analyze("being before hers") == ["befor"]  # stop words are matched after stemming
    assert analyze("x" * 39 + " " + "y" * 40) == ["x" * 39]  # 40 bytes or more: dropped
    assert analyze("über 2023 half-marathons") == ["uber", "2023", "half", "marathon"]
    assert analyze("") == [] and analyze("the and of") == []


@pytest.mark.parametrize("seed", range(5))
def test_analyze_gives_ascii_text_the_terms_of_the_word_by_word_path(seed: int) -> None:
    rng = random.Random(seed)
    words = [*TEXTS[0].split(), "RUNNING", "Don't", "x" * 39, "y" * 40, "a_b", "3.14", "THE"]
    for _ in range(200):
        text = "".join(rng.choice([*words, *string.printable]) + " " for _ in range(30))
        assert text.isascii() and analyze(text) == word_by_word(text)
    assert (
        analyze("Café über ÉCOLE") == word_by_word("Café über ÉCOLE") == ["cafe", "uber", "ecole"]
    )


def test_scores_are_okapi_bm25_with_lances_constants() -> None:
    docs = ["red kayak", "a red red boat on the lake", "blue lake"]
    ix = TextIndex(docs)
    terms = [analyze(d) for d in docs]
    avg = sum(map(len, terms)) / len(terms)

    def bm25(doc: list[str], query: list[str]) -> float:
        total = 0.0
        for q in query:  # a repeated query term counts once per repeat, as in LanceDB
            df = sum(q in t for t in terms)
            tf = doc.count(q)
            if tf:
                idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
                total += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avg))
        return total

    for query in ["red lake", "kayak kayak", "blue", "green"]:
        want = [bm25(t, analyze(query)) for t in terms]
        assert list(ix.scores(query)) == pytest.approx(want, rel=1e-5)


def one_namespace(path: Path, emb: HashEmbedder, ns: str = "a") -> EvidenceStore:
    store = EvidenceStore(str(path), emb.model_name, HASH_DIM)
    store.turns.upsert([raw(ns, "s", f"t{i}", t, emb) for i, t in enumerate(TEXTS)])
    return store


def test_snapshot_full_text_scores_as_lancedb_on_a_table_of_one_namespace(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    plain = one_namespace(tmp_path / "db", emb)
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    for query in QUERIES:
        want = {r["id"]: r["_score"] for r in plain.turns.search_text("a", query, 10)}
        got = {r["id"]: r["_score"] for r in snap.turns.search_text("a", query, 10)}
        assert got == pytest.approx(want, rel=1e-4), query
    assert snap.db.snapshots is not None and snap.db.snapshots._entries


def test_snapshot_full_text_ranks_best_first_within_limit_and_match(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    one_namespace(tmp_path / "db", emb)
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    hits = snap.turns.search_text("a", "cat marathon", 2)
    assert len(hits) == 2 and hits[0]["_score"] >= hits[1]["_score"] > 0
    assert snap.turns.search_text("a", "cat", 10, "other-session") == []
    assert snap.turns.search_text("a", "zebra", 10) == []  # no term: no row


def test_snapshot_full_text_statistics_are_the_namespaces_own(
    tmp_path: Path, emb: HashEmbedder
) -> None:
    store = one_namespace(tmp_path / "db", emb)
    snap = EvidenceStore(str(tmp_path / "db"), emb.model_name, HASH_DIM, snapshot_rows=1000)
    before = {r["id"]: r["_score"] for r in snap.turns.search_text("a", "cat Lisbon", 10)}
    # another tenant writes many rows with the same words
    store.turns.upsert([raw("b", "s", f"u{i}", "a cat in Lisbon", emb) for i in range(20)])
    after = {r["id"]: r["_score"] for r in snap.turns.search_text("a", "cat Lisbon", 10)}
    assert after and after == pytest.approx(before, rel=1e-6)


@pytest.fixture
def emb() -> HashEmbedder:
    return HashEmbedder()


def bm25s_scores(docs: list[str | None], query: str) -> np.ndarray:
    """The scores of bm25s's own index of `analyze`'s terms: what `TextIndex` computes."""
    terms = [analyze(d or "") for d in docs]
    if not any(terms):
        return np.zeros(len(docs), dtype=np.float32)
    index = bm25s.BM25(k1=K1, b=B, method="lucene")
    index.index(terms, show_progress=False)
    ids = [index.vocab_dict[t] for t in analyze(query) if t in index.vocab_dict]
    if not ids:
        return np.zeros(len(docs), dtype=np.float32)
    return np.asarray(index.get_scores(ids), dtype=np.float32) * (K1 + 1)


@pytest.mark.parametrize("seed", range(4))
def test_scores_are_bm25s_scores_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    words = [
        *" ".join(TEXTS).split(),
        "Café",
        "über",
        "ÉCOLE",
        "x" * 45,
        "é" * 25,
        "the",
        "a_b",
        "2024",
        # non-ASCII separators beside words (read as spaces) and non-ASCII word characters
        "half–marathon",
        "“Lisbon’s”",
        "3×4°C",
        "x²+½cup",
        "é–x",
    ]
    docs: list[str | None] = [
        " ".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(80)
    ]
    docs += [None, "", "the and of", "naïve café ☕ résumé", "– “ ”", "cat–dog"]
    rng.shuffle(docs)
    index = TextIndex(docs)
    queries = ["café résumé", "naive", "marathon marathon cat", "zebra", "x² cup 4°C", "dog"]
    for query in [*QUERIES, *queries]:
        assert np.array_equal(index.scores(query), bm25s_scores(docs, query)), query


def test_an_arrow_column_indexes_as_its_values_do() -> None:
    docs = [*TEXTS, None, "Café über"]
    chunked = pa.chunked_array([pa.array(docs[:3]), pa.array(docs[3:])])
    large = pa.array(docs, pa.large_string())
    sliced = pa.array(["a cat", *docs], pa.string()).slice(1)  # an offset into its buffers
    for query in QUERIES:
        want = TextIndex(docs).scores(query)
        for column in (chunked, large, sliced):
            assert np.array_equal(TextIndex(column).scores(query), want), (column.type, query)


def test_an_empty_or_termless_column_scores_nothing() -> None:
    assert TextIndex([]).scores("cat").shape == (0,)
    assert not TextIndex(["the", None, ""]).scores("the cat").any()


def carried_rows(
    before: list[str | None], after: list[str | None], ids_before: list[int], ids_after: list[int]
) -> np.ndarray:
    """For each row of `after`, the row of `before` with its id and its text, else -1."""
    at = {i: r for r, i in enumerate(ids_before)}
    return np.asarray(
        [
            at[i] if i in at and (before[at[i]] or "") == (t or "") else -1
            for i, t in zip(ids_after, after, strict=True)
        ],
        dtype=np.int64,
    )


@pytest.mark.parametrize("seed", range(6))
def test_an_index_carried_over_a_write_scores_as_one_built_afresh(seed: int) -> None:
    rng = random.Random(seed)
    words = [*" ".join(TEXTS).split(), "Café", "naïve", "half–marathon", "x²", "the", "2024"]

    def doc() -> str:  # with a word of its own, gone when the row is
        return " ".join(
            [*(rng.choice(words) for _ in range(rng.randint(0, 25))), f"w{rng.random()}"]
        )

    ids = list(range(40))
    docs: list[str | None] = [doc() for _ in ids]
    index = TextIndex(docs)
    for _ in range(3):  # writes one after another: rows added, changed, dropped, reordered
        new_ids = [i for i in ids if rng.random() > 0.1] + list(range(max(ids) + 1, max(ids) + 6))
        rng.shuffle(new_ids)
        old = dict(zip(ids, docs, strict=True))
        new_docs = [old[i] if i in old and rng.random() > 0.2 else doc() for i in new_ids]
        new_docs[0] = None
        carried = TextIndex(new_docs, (index, carried_rows(docs, new_docs, ids, new_ids)))
        fresh = TextIndex(new_docs)
        for query in [*QUERIES, "café naive", "x² marathon", "2024 half"]:
            assert np.array_equal(carried.scores(query), fresh.scores(query)), query
        # a term no row holds any more is not kept
        assert set(carried._vocab) == {t for d in new_docs for t in analyze(d or "")}
        ids, docs, index = new_ids, new_docs, carried
