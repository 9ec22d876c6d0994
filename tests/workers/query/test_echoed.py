"""A raw turn that asks the question again (an agent framework stored the user's message,
then searched memory with it) goes behind every other item."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.workers.builders import HASH_DIM, HashEmbedder, user_turn
from tests.workers.query.test_selection import cand, fused, ids
from tests.workers.query.test_service import request
from workers.indexer.service import IndexBatch, IndexerService
from workers.query.echoed import echoes_last
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

ASKED = "What is the name of the puppy Ann adopted?"


def test_a_turn_asking_the_question_again_goes_last_and_nothing_else_moves() -> None:
    chosen = [
        fused(cand("echo", kind="turn", text="what's the name of the puppy Ann adopted ?"), 1.0),
        fused(cand("answer", kind="turn", text="Ann adopted a puppy named Biscuit."), 0.9),
        fused(cand("record", text=ASKED), 0.8),  # a record of it: kept (says who asked)
        fused(cand("other", kind="turn", text="What breed is the puppy Ann adopted?"), 0.7),
        fused(cand("window", kind="window", text=f"Ann: {ASKED}\nBo: Biscuit?"), 0.6),
    ]
    assert ids(echoes_last(chosen, ASKED)) == ["answer", "record", "other", "window", "echo"]
    assert ids(echoes_last(chosen, "")) == ids(chosen)
    short = [fused(cand("j", kind="turn", text="What's my job?"), 1.0), chosen[1]]
    assert ids(echoes_last(short, "What is my job?")) == ["answer", "j"]


@pytest.mark.asyncio
async def test_the_question_stored_before_it_is_searched_is_not_its_first_item(
    tmp_path: Path,
) -> None:
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    emb = HashEmbedder()
    indexer = IndexerService(store, emb)
    said = [
        "Ann adopted a puppy named Biscuit",
        "The train to Porto was late again",
        ASKED,  # the agent's user asks, and the framework stores it first
    ]
    for n, text in enumerate(said):  # one a session: no window joins them
        turn = user_turn(f"s{n}", datetime(2024, 3, 2), f"t{n}", text, emb, n)
        await indexer.write(IndexBatch(turns=[turn]))

    reply = await QueryService(QueryDeps(store, emb)).search(request("a", ASKED, k=3))

    turns = [e.turn_ids[0] for e in reply.evidence if e.kind == "turn"]
    assert turns[-1] == "t2" and "t0" in turns
