"""The content cache in front of an embedder: identical texts embedded once, bounded."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from streams.metrics import ObservedEmbedder
from workers.embedding.base import Matrix, embed_queries
from workers.embedding.bounded import BoundedEmbedder
from workers.embedding.cache import CachedEmbedder


class CountingEmbedder:
    """A deterministic embedder that records every text it was asked to embed."""

    model_name = "counting"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> Matrix:
        self.seen.extend(texts)
        rows = [[len(t), sum(map(ord, t)) % 97, 1.0, float(t.count(" "))] for t in texts]
        m = np.asarray(rows, dtype=np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_cache_repeated_texts_embedded_once_and_rows_in_call_order() -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, 100)
    first = cache.embed(["a b", "c", "a b"])
    second = cache.embed(["c", "d", "a b"])
    assert inner.seen == ["a b", "c", "d"]
    expected = CountingEmbedder().embed(["c", "d", "a b"])
    assert np.array_equal(second, expected)
    assert np.array_equal(first[0], first[2])
    assert (cache.hits, cache.misses) == (3, 3)
    assert cache.hit_rate == pytest.approx(0.5)


def test_cache_over_capacity_evicts_least_recently_used() -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, 2)
    cache.embed(["a", "b"])
    cache.embed(["a"])  # a is now the most recent
    cache.embed(["c"])  # evicts b
    inner.seen.clear()
    cache.embed(["a", "b", "c"])
    assert inner.seen == ["b"]
    assert len(cache._rows) == 2


def test_cache_returned_rows_do_not_alias_the_cache() -> None:
    cache = CachedEmbedder(CountingEmbedder(), 10)
    out = cache.embed(["x"])
    out[0, :] = 0.0  # a caller scribbling on its result
    assert np.linalg.norm(cache.embed(["x"])[0]) == pytest.approx(1.0)


def test_cache_empty_call_and_lookup_hook() -> None:
    calls: list[tuple[int, int]] = []
    cache = CachedEmbedder(CountingEmbedder(), 10, on_lookup=lambda h, m: calls.append((h, m)))
    assert cache.embed([]).shape == (0, 4)
    cache.embed(["p", "q"])
    cache.embed(["q", "q", "r"])
    assert calls == [(0, 2), (2, 1)]


def test_cache_inner_wrong_shape_raises_value_error() -> None:
    class Short(CountingEmbedder):
        def embed(self, texts: list[str]) -> Matrix:
            return super().embed(texts)[:-1]

    with pytest.raises(ValueError, match="vectors for 2 texts"):
        CachedEmbedder(Short(), 10).embed(["a", "b"])


def test_cache_zero_capacity_rejected() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        CachedEmbedder(CountingEmbedder(), 0)


def test_cache_threads_share_one_bounded_map() -> None:
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner, 50)
    texts = [f"t{i}" for i in range(80)]

    def work() -> None:
        for i in range(0, 80, 8):
            got = cache.embed(texts[i : i + 8])
            assert np.allclose(got, CountingEmbedder().embed(texts[i : i + 8]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache._rows) <= 50
    assert cache.hits + cache.misses == 4 * 80


def test_query_texts_pass_the_cache_to_the_model_through_every_wrapper() -> None:
    class QueryAware(CountingEmbedder):
        max_input_bytes = 3

        def __init__(self) -> None:
            super().__init__()
            self.queried: list[str] = []

        def embed_queries(self, texts: list[str]) -> Matrix:
            self.queried.extend(texts)
            return self.embed(texts)

    aware = QueryAware()
    chain = CachedEmbedder(ObservedEmbedder(BoundedEmbedder(aware)), 10)
    embed_queries(chain, ["abcdef", "x"])
    embed_queries(chain, ["x"])
    assert aware.queried == ["abc", "x", "x"]  # cut to the backend's bound, never cached
    assert len(chain._rows) == 0
    plain = CountingEmbedder()  # a backend without its own way embeds them as any text
    assert np.array_equal(embed_queries(CachedEmbedder(plain, 10), ["x"]), plain.embed(["x"]))
