"""Cross-encoder rerank: a tiny model built here goes through FlagReranker's real load and
scoring path; the reordering arithmetic is checked against a scorer with known scores."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.workers.builders import HashEmbedder
from tests.workers.query.test_service import request
from tests.workers.query.test_windows import store as store  # noqa: F401 - a fixture
from workers.query.rerank import FlagCrossEncoder, load_reranker, rerank_pool, rerank_route
from workers.query.selection import Candidate, RouteRanking
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

VOCAB = "[PAD] [UNK] [CLS] [SEP] [MASK] the a blue vase pottery class glazing workshop bo ann"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer BERT cross-encoder with random weights and a 15-word vocabulary."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-reranker")
    BertTokenizer(vocab={w: i for i, w in enumerate(VOCAB.split())}).save_pretrained(path)
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=len(VOCAB.split()),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.2,  # wider than BERT's 0.02: distinct inputs, distinct logits
    )
    BertForSequenceClassification(config).save_pretrained(path)
    return path


def test_tiny_model_loads_and_scores_pairs_as_the_model_does(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    reranker = load_reranker(str(tiny_model))
    assert isinstance(reranker, FlagCrossEncoder)
    passages = ["a blue vase", "pottery class", "glazing workshop"]
    scores = reranker.score("blue vase", passages)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert len({round(s, 4) for s in scores}) == 3  # different inputs, different logits
    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model).eval()
    with torch.no_grad():
        logits = model(**tok(["blue vase"] * 3, passages, padding=True, return_tensors="pt"))
    assert scores == pytest.approx(logits.logits[:, 0].tolist(), abs=1e-4)
    assert reranker.score("blue vase", passages) == scores
    assert reranker.score("blue vase", passages[:1]) == pytest.approx(scores[:1], abs=1e-5)
    assert reranker.score("blue vase", []) == []


@pytest.mark.parametrize(
    ("model", "reason"),
    [(None, "LYCHEE_RERANKER_MODEL is not set"), ("/nonexistent/reranker", "cannot load")],
)
def test_without_a_usable_model_rerank_is_off_with_one_notice(
    model: str | None, reason: str
) -> None:
    with capture_logs() as logs:
        assert load_reranker(model) is None
    assert [e["event"] for e in logs] == ["rerank.off"]
    assert reason in logs[0]["reason"]


class Scripted:
    """Scores each passage by a fixed table: the arithmetic without a model."""

    name = "scripted"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.seen: list[list[str]] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.seen.append(list(passages))
        return [self.table[p] for p in passages]


def cand(i: str) -> Candidate:
    return Candidate(item_id=i, kind="record", text=i, session_id="s", turn_ids=(i,))


def test_rerank_reorders_the_pool_keeps_the_tail_and_records_scores() -> None:
    ranking = RouteRanking("r0", [cand(x) for x in ("a", "b", "c", "d", "e")])
    scorer = Scripted({"a": 0.1, "b": 0.9, "c": 0.5, "d": 9.0})
    out = rerank_route(ranking, "q", scorer, pool=3)
    assert [c.item_id for c in out.candidates] == ["b", "c", "a", "d", "e"]
    assert scorer.seen == [["a", "b", "c"]]  # only the pool is scored
    assert [c.channel_scores.get("rerank") for c in out.candidates] == [0.9, 0.5, 0.1, None, None]
    tie = rerank_route(ranking, "q", Scripted(dict.fromkeys("abcde", 1.0)), pool=5)
    assert [c.item_id for c in tie.candidates] == ["a", "b", "c", "d", "e"]


def test_rerank_pool_is_the_larger_of_the_limit_and_4k() -> None:
    assert rerank_pool(15) == 100 and rerank_pool(40) == 160 and rerank_pool(10, 8) == 40


@pytest.mark.asyncio
async def test_service_reranks_each_route_and_the_no_fusion_ablation_does_not(
    store: EvidenceStore,  # noqa: F811
    tiny_model: Path,
) -> None:
    svc = QueryService(QueryDeps(store, HashEmbedder(), reranker=load_reranker(str(tiny_model))))
    reply = await svc.search(request("a", "blue vase", k=3))
    assert "rerank" in reply.timings_ms
    assert reply.evidence and all("rerank" in e.scores for e in reply.evidence)
    plain = await svc.search(request("a", "blue vase", k=3, ablation="no-fusion"))
    assert "rerank" not in plain.timings_ms
    assert plain.evidence and all("rerank" not in e.scores for e in plain.evidence)
