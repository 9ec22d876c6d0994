"""What a model is given of a text is bounded: a long text costs what its prefix costs, and a
normal text's vector does not change."""

from __future__ import annotations

import time

import numpy as np
import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI
from workers.embedding.base import Matrix
from workers.embedding.bounded import BoundedEmbedder, clip, local_input_bytes
from workers.embedding.local import LocalEmbedder
from workers.embedding.openai_api import MAX_INPUT_TOKENS, OpenAIEmbedder, request_batches

PROSE = (
    "We moved the telescope mount to the north field last week, and the star charts now sit "
    "on the SD card by season and by month. Next, the mount should remember its home. "
)


def long_text(chars: int = 200_000) -> str:
    return (PROSE * (chars // len(PROSE) + 1))[:chars]


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ("short", 64, "short"),
        ("abcdef", 4, "abcd"),
        ("ab\u00e9cd", 3, "ab"),  # é is 2 bytes: not cut in half
        ("ab\u00e9cd", 4, "ab\u00e9"),
        ("\u65e5\u672c\u8a9e", 7, "\u65e5\u672c"),  # 3 bytes each
        ("a\U0001f389b", 4, "a"),  # an emoji is 4 bytes
        ("a\ud800bc", 4, "a\ud800"),  # a lone surrogate passes as it is
    ],
)
def test_clip_keeps_the_longest_whole_character_prefix_within_the_bytes(
    text: str, max_bytes: int, expected: str
) -> None:
    assert clip(text, max_bytes) == expected
    assert len(expected.encode("utf-8", "surrogatepass")) <= max_bytes


class Recording:
    model_name = "recording"
    dim = 2
    max_input_bytes = 100
    batch_size = 7

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> Matrix:
        self.seen += texts
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_bounded_embedder_gives_the_model_each_text_cut_to_its_bound() -> None:
    inner = Recording()
    emb = BoundedEmbedder(inner)
    assert emb.embed(["short", "x" * 1_000, "\u00e9" * 80]).shape == (3, 2)
    assert inner.seen == ["short", "x" * 100, "\u00e9" * 50]
    assert (emb.model_name, emb.dim, emb.batch_size) == ("recording", 2, 7)


def test_a_200000_character_text_is_embedded_quickly_as_its_bounded_prefix(
    embedder: LocalEmbedder,
) -> None:
    bounded = BoundedEmbedder(embedder)
    text = long_text()
    assert bounded.max_input_bytes == local_input_bytes(256) == 8_192
    started = time.perf_counter()
    vec = bounded.embed([text])
    assert time.perf_counter() - started < 5.0  # one 256-token pass, not a 200,000-char one
    prefix = text[: bounded.max_input_bytes]
    assert np.array_equal(vec, embedder.embed([prefix]))
    # the model reads 256 tokens, far within the bound: the vector is the uncut text's
    assert np.allclose(vec, embedder.embed([text]), atol=1e-6)
    # and a text within the bound is given to the model as it is
    assert np.array_equal(bounded.embed([PROSE * 4]), embedder.embed([PROSE * 4]))


def test_openai_embedder_is_given_at_most_its_input_limit_and_requests_under_their_cap() -> None:
    with FakeOpenAI(embedding_dim=16) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0, timeout=10)
        emb = BoundedEmbedder(OpenAIEmbedder(client, "text-embedding-3-small", dim=16))
        assert emb.max_input_bytes == MAX_INPUT_TOKENS  # a token is at least a byte
        assert emb.embed([long_text(), "hello"]).shape == (2, 16)
        [body] = server.embedding_requests
        assert [len(t) for t in body["input"]] == [MAX_INPUT_TOKENS, 5]
    texts = ["a" * 8_000] * 80 + ["b"]
    runs = request_batches(texts, 256, 300_000)
    assert [len(r) for r in runs] == [37, 37, 7] and sum(runs, []) == texts
    assert [len(r) for r in request_batches(["x"] * 600, 256, 300_000)] == [256, 256, 88]
    assert request_batches(["y" * 10, "z"], 256, 5) == [["y" * 10], ["z"]]  # too long: alone
