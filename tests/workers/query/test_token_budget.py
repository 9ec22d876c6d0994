"""A request's `token_budget`: the reply keeps, in the order they had, the items whose context
still fits, passing over one that would not, and says how many tokens they take."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas import EvidenceItem, QueryRequest
from schemas.query import TOKEN_BUDGET_MIN
from tests.workers.builders import HashEmbedder, store_of
from workers.query.serialize import items_that_fit, serialize_context, within_budget
from workers.query.service import QueryDeps, QueryService

FILLER = "the trail, the weather, the crowded ferry and the small bakery near the harbour"


@pytest.fixture
def service(tmp_path: Path) -> QueryService:
    """Twelve records of about forty tokens each about one trip."""
    texts = [
        f"Ann hiked on the island on day {i} of the trip and described {FILLER}" for i in range(12)
    ]
    return QueryService(QueryDeps(store_of(str(tmp_path / "db"), texts), HashEmbedder()))


def item(item_id: str, text: str, kind: str = "record") -> EvidenceItem:
    return EvidenceItem(kind=kind, item_id=item_id, text=text, turn_ids=[item_id], session_id="s")


def request(k: int, token_budget: int | None) -> QueryRequest:
    return QueryRequest(
        correlation_id="c",
        namespace="a",
        query="Where did Ann hike?",
        k=k,
        reply_partition=0,
        deadline_ms=int((time.time() + 30) * 1000),
        token_budget=token_budget,
    )


async def test_a_budget_keeps_the_leading_items_that_fit(service: QueryService) -> None:
    whole = await service.search(request(12, None))
    assert len(whole.evidence) == 12 and whole.context_tokens > 200
    cut = await service.search(request(12, 200))
    n = len(cut.evidence)
    assert 0 < n < 12
    assert cut.evidence == whole.evidence[:n]  # items of one size: the leading ones, in order
    assert cut.context_tokens <= 200 and (cut.context, cut.context_tokens) == serialize_context(
        cut.evidence
    )
    assert serialize_context(whole.evidence[: n + 1])[1] > 200  # the next would not fit


def test_an_item_that_would_overflow_is_passed_over_for_the_next_that_fits() -> None:
    """A long window ranked first leaves the budget to the short items below it."""
    short = [item(f"r{i}", f"Ann hiked on day {i}.") for i in range(3)]
    long = item("w", " ".join([FILLER] * 10), kind="window")
    budget = serialize_context(short)[1]
    kept, context, tokens = within_budget([long, *short], budget)
    assert kept == short and (context, tokens) == serialize_context(short)
    assert within_budget([short[0], long, short[1]], budget)[0] == short[:2]  # order kept
    assert within_budget([long], budget)[0] == []  # nothing fits: nothing


async def test_a_budget_the_items_fit_in_changes_nothing(service: QueryService) -> None:
    whole = await service.search(request(3, None))
    roomy = await service.search(request(3, 100_000))
    assert roomy.evidence == whole.evidence and roomy.context == whole.context


@pytest.mark.parametrize("budget", [0, TOKEN_BUDGET_MIN - 1, 10**9])
def test_a_budget_out_of_range_is_refused_naming_it(budget: int) -> None:
    with pytest.raises(ValidationError, match="token_budget"):
        request(10, budget)


def test_what_fits_holds_the_leading_items_that_fit_and_never_overflows() -> None:
    """Whatever the budget: the prefix the evidence budget keeps, then what else fits."""
    items = [
        item(f"r{i}", " ".join([f"Ann hiked to cove {i}."] * (1 + i * 7 % 5)), kind="record")
        if i % 3
        else item(f"t{i}", f"Ann: {FILLER} {i}", kind="turn")
        for i in range(30)
    ]
    many = [item(f"m{i}", f"Ann ate {i}.") for i in range(200)]  # the sum of lines drifts
    for budget, given in [(b, items) for b in range(TOKEN_BUDGET_MIN, 700, 9)] + [
        (b, many) for b in range(600, 1300, 37)
    ]:
        kept, context, tokens = within_budget(given, budget)
        assert (context, tokens) == serialize_context(kept) and tokens <= budget
        n = items_that_fit(given, budget)
        assert kept[:n] == given[:n] and kept == [i for i in given if i in kept]
