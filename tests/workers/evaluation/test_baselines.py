"""Raw-turn baselines on a tiny invented corpus."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from schemas import Exchange, Role, Turn
from tests.workers.builders import HashEmbedder
from workers.datasets import Conversation, Session
from workers.evaluation.baselines import TurnCorpus, conversation_corpus, render_turn_line
from workers.evaluation.metrics import RankedItem

TURNS = [
    ("d1:1", "[1 May 2023] Ada: I adopted a puppy named Rex"),
    ("d1:2", "[1 May 2023] Bram: the weather is nice today"),
    ("d2:1", "[2 May 2023] Ada: Rex likes the park"),
]


@pytest.fixture
def corpus() -> TurnCorpus:
    return TurnCorpus(TURNS, np.eye(3, dtype=np.float32))  # one axis per turn


def test_render_turn_line() -> None:
    date = datetime(2023, 5, 8, 13, 56)
    assert render_turn_line(date, "Ada", " hello there ", None) == "[8 May 2023] Ada: hello there"
    assert (
        render_turn_line(date, "Ada", "look", "a dog on a beach")
        == "[8 May 2023] Ada: look [image: a dog on a beach]"
    )
    assert render_turn_line(None, "Bram", "hi", None) == "Bram: hi"


def test_bm25_ranks_the_matching_turn_first(corpus: TurnCorpus) -> None:
    top = corpus.bm25("What did she adopt, a puppy?", 3)
    assert top[0] == RankedItem(TURNS[0][1], ("d1:1",))
    assert len(top) == 1  # turns without a query term are not ranked by position
    # same term frequency: the shorter turn wins on length normalization
    assert [i.turn_ids[0] for i in corpus.bm25("Rex", 5)] == ["d2:1", "d1:1"]
    assert corpus.bm25("the is", 5) == []  # stopwords only


def test_dense_ranks_by_cosine(corpus: TurnCorpus) -> None:
    q = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    assert [i.turn_ids[0] for i in corpus.dense(q, 2)] == ["d1:2", "d2:1"]


def test_hybrid_is_reciprocal_rank_fusion(corpus: TurnCorpus) -> None:
    q = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    assert corpus.dense_ranking(q) == [1, 2, 0]
    assert corpus.bm25_ranking("Rex") == [2, 0]
    # turn 0: 1/(60+3) + 1/(60+2) = 0.03200; turn 1: 1/61 = 0.01639;
    # turn 2: 1/(60+2) + 1/(60+1) = 0.03252
    assert corpus.hybrid_ranking("Rex", q) == [2, 0, 1]
    assert [i.turn_ids[0] for i in corpus.hybrid("Rex", q, 2)] == ["d2:1", "d1:1"]


def test_embeddings_must_match_turns() -> None:
    with pytest.raises(ValueError, match="one embedding row per turn"):
        TurnCorpus(TURNS, np.eye(2, dtype=np.float32))


def test_empty_corpus() -> None:
    empty = TurnCorpus([], np.zeros((0, 3), dtype=np.float32))
    q = np.ones(3, dtype=np.float32)
    assert empty.dense(q, 5) == empty.bm25("x", 5) == empty.hybrid("x", q, 5) == []


def test_a_baseline_is_asked_by_name(corpus: TurnCorpus) -> None:
    q = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    assert corpus.ranked("dense", "Rex", q, 2) == corpus.dense(q, 2)
    assert corpus.ranked("bm25", "Rex", q, 2) == corpus.bm25("Rex", 2)
    assert corpus.ranked("hybrid", "Rex", q, 2) == corpus.hybrid("Rex", q, 2)
    with pytest.raises(ValueError, match="unknown baseline 'sparse'"):
        corpus.ranked("sparse", "Rex", q, 2)


def test_a_conversations_corpus_is_its_rendered_turns_embedded_once() -> None:
    date = datetime(2023, 5, 8)
    turns = [
        Turn(role=Role.user, speaker=s, content=t, turn_id=i)
        for i, s, t in [
            ("d1:1", "Ada", "hello"),
            ("d1:2", "Bram", "look"),
        ]
    ]
    exchanges = [
        Exchange(
            namespace="n", session_id="s", seq=n, exchange_id=f"s:{n}", session_date=date, turns=[t]
        )
        for n, t in enumerate(turns)
    ]
    embedder = HashEmbedder()
    corpus = conversation_corpus(Conversation("n", [Session("s", date, exchanges)]), embedder)
    assert corpus.turn_ids == ["d1:1", "d1:2"]
    assert embedder.calls == [["[8 May 2023] Ada: hello", "[8 May 2023] Bram: look"]]
    assert corpus.texts == embedder.calls[0]
    np.testing.assert_array_equal(corpus.embeddings, embedder.embed(corpus.texts))
