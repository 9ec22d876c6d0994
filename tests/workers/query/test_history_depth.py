"""A question about the whole history searches as deep however few items it asks for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schemas import QueryRequest
from tests.workers.builders import HASH_DIM, HashEmbedder, turn
from workers.query.presets import SERVED
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

QUESTION = "Over our chats, in what order did the parts of my bakery website come up?"
PARTS = ["checkout", "newsletter", "menu page", "gallery", "contact form", "order tracking"]
MOODS = ["started on", "got stuck on", "rewrote", "tested", "finished", "asked about"]


def stored(tmp_path: Path) -> EvidenceStore:
    """Four sessions of a user speaking of their bakery website's parts: more turns about
    the asked topic than a request of ten items searches for by itself."""
    name, embedder = HashEmbedder.model_name, HashEmbedder()
    s = EvidenceStore(str(tmp_path / "db"), name, HASH_DIM, snapshot_rows=100_000)
    texts = [
        (f"s{n}", f"Today I {mood} the {part} of my bakery website.")
        for n in range(4)
        for part in PARTS
        for mood in MOODS[n : n + 2]
    ]
    vectors = embedder.embed([t for _, t in texts])
    s.turns.upsert(
        [
            turn("p", f"t{i}", text, 0, session=session).model_copy(
                update={"embedding": vectors[i].tolist(), "embedding_model": name}
            )
            for i, (session, text) in enumerate(texts)
        ]
    )
    return s


def ask(k: int) -> QueryRequest:
    return QueryRequest(
        correlation_id=f"c{k}",
        namespace="p",
        query=QUESTION,
        k=k,
        reply_partition=0,
        deadline_ms=int((time.time() + 30) * 1000),
    )


@pytest.mark.asyncio
async def test_a_history_questions_first_items_are_those_of_a_request_of_the_led_pool(
    tmp_path: Path,
) -> None:
    service = QueryService(QueryDeps(stored(tmp_path), HashEmbedder()))
    few = await service.search(ask(10))
    pool = await service.search(ask(SERVED.led_pool))
    assert len(pool.evidence) > len(few.evidence) == 10
    assert [e.item_id for e in few.evidence] == [e.item_id for e in pool.evidence[:10]]
    assert len({e.session_id for e in few.evidence}) == 4  # every session has its part
