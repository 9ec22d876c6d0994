"""An answer's evidence fits the model's context window: the fake LLM server refuses any
request larger than its window, as llama.cpp does, and no request is refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schemas import EvidenceItem, QueryRequest
from tests.fakes.openai_server import FakeOpenAI, model_tokens, text
from tests.workers.builders import HashEmbedder, store_of
from workers.llm.calls import make_client
from workers.query.answer import LLMAnswerer, build_answer_messages
from workers.query.serialize import items_that_fit, serialize_context
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

WINDOW = 2560  # the fake model's context window, in its own tokens
FILLER = (
    "and she described the trail, the weather, the crowded ferry, the small bakery near the "
    "harbour, the long queue for tickets and the friends she met on the way back home"
)


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    """Twenty long records about one trip: far more evidence than a small window holds."""
    texts = [
        f"Ann hiked on the island on day {i} of the trip, {FILLER}; {FILLER}" for i in range(20)
    ]
    return store_of(str(tmp_path / "db"), texts)


def request(query: str, k: int) -> QueryRequest:
    return QueryRequest(
        correlation_id="c",
        namespace="a",
        query=query,
        k=k,
        reply_partition=0,
        deadline_ms=int((time.time() + 30) * 1000),
        answer=True,
    )


@pytest.mark.parametrize(("where", "configured"), [("props", None), ("none", WINDOW)])
async def test_answer_evidence_is_cut_to_the_context_window_and_the_cut_is_said(
    store: EvidenceStore, where: str, configured: int | None
) -> None:
    with FakeOpenAI() as server:
        server.context_tokens = WINDOW  # stated by the server, or only configured
        server.states_context = where  # type: ignore[assignment]
        server.script(text("the island"))
        client = make_client(server.url, None, timeout_s=5.0)
        answerer = LLMAnswerer(client, "m", context_tokens=configured)
        svc = QueryService(QueryDeps(store, HashEmbedder(), answerer=answerer))
        reply = await svc.search(request("Where did Ann hike?", k=20))
        await client.close()
        prompt = server.requests[-1]["messages"][-1]["content"]
    assert server.oversized == [] and len(server.requests) == 1
    assert reply.answer == "the island" and reply.answer_error is None
    whole = build_answer_messages("Where did Ann hike?", reply.context)
    assert len(reply.evidence) == 20
    assert model_tokens(whole) + LLMAnswerer.max_output_tokens > WINDOW  # refused, if sent
    assert reply.answer_items is not None and 0 < reply.answer_items < 20
    given = serialize_context(reply.evidence[: reply.answer_items])[0]
    assert given in prompt  # the leading items, whole, in the reply's order
    assert reply.evidence[reply.answer_items].text not in prompt


async def test_answer_without_a_known_window_reads_every_item(store: EvidenceStore) -> None:
    with FakeOpenAI() as server:
        server.script(text("the island"))
        client = make_client(server.url, None, timeout_s=5.0)
        svc = QueryService(QueryDeps(store, HashEmbedder(), answerer=LLMAnswerer(client, "m")))
        reply = await svc.search(request("Where did Ann hike?", k=20))
        await client.close()
    assert reply.answer == "the island" and reply.answer_items == 20


async def test_answer_refused_by_the_server_is_an_error_not_an_answer(
    store: EvidenceStore,
) -> None:
    with FakeOpenAI() as server:
        server.context_tokens = WINDOW
        server.states_context = "none"  # the window is unknown to the client: nothing is cut
        client = make_client(server.url, None, timeout_s=5.0)
        svc = QueryService(QueryDeps(store, HashEmbedder(), answerer=LLMAnswerer(client, "m")))
        reply = await svc.search(request("Where did Ann hike?", k=20))
        await client.close()
    assert len(server.oversized) == 1
    assert reply.answer is None and "HTTP 400" in (reply.answer_error or "")


def test_items_that_fit_takes_whole_leading_items_within_the_budget() -> None:
    many = [
        EvidenceItem(
            kind="record" if i % 2 else "turn",
            item_id=f"i{i}",
            text=f"item {i}: {FILLER}",
            turn_ids=[f"t{i}"],
            session_id="s1",
        )
        for i in range(8)
    ]
    full = serialize_context(many)[1]
    assert items_that_fit(many, full) == 8
    assert items_that_fit(many, full - 1) == 7
    n = items_that_fit(many, full // 2)
    assert serialize_context(many[:n])[1] <= full // 2 < serialize_context(many[: n + 1])[1]
    assert items_that_fit(many, 0) == 0
