"""The plan contract: ISO dates of every precision, bounds, and the caps."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.plan import MAX_QUERIES, MAX_ROUTE_QUERIES, MAX_ROUTES, Plan, Route, TemporalFilter


def test_temporal_filter_validates_iso_dates_and_order() -> None:
    window = TemporalFilter(since="2023-02", until="2023")
    assert (window.start, window.end) == (date(2023, 2, 1), date(2023, 12, 31))
    for bad in ({"since": "May 2023"}, {"until": "2023-13"}, {"since": "2023-02-30"}):
        with pytest.raises(ValidationError):
            TemporalFilter(**bad)
    with pytest.raises(ValidationError):
        TemporalFilter(since="2023-06", until="2023-05-31")


@pytest.mark.parametrize(
    ("since", "until", "inside", "outside"),
    [
        ("", "", ["1999", "2023-05", "2030-01-01"], []),
        ("2023-05-08", "2023-05-08", ["2023", "2023-05", "2023-05-08"], ["2023-05-09", "2023-04"]),
        ("2023-05", "", ["2023", "2023-05-01", "2024-01"], ["2023-04-30", "2022"]),
        ("", "2023-05-31", ["2023-05", "2020"], ["2023-06-01", "2024"]),
    ],
)
def test_temporal_filter_overlaps_dates_of_every_precision(
    since: str, until: str, inside: list[str], outside: list[str]
) -> None:
    window = TemporalFilter(since=since, until=until)
    assert [v for v in inside if window.overlaps(v)] == inside
    assert [v for v in outside if window.overlaps(v)] == []


def test_models_enforce_caps_and_forbid_unknown_fields() -> None:
    route = Route(goal="g", queries=["q"])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=[f"q{i}" for i in range(MAX_ROUTE_QUERIES + 1)])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=[])
    with pytest.raises(ValidationError):
        Route(goal="g", queries=["  "])
    base: dict[str, Any] = {
        "question_type": "single",
        "semantic_queries": ["q"],
        "routes": [route],
        "source": "llm",
    }
    assert Plan(**base).temporal_filter is None
    with pytest.raises(ValidationError):
        Plan(**(base | {"semantic_queries": [f"q{i}" for i in range(MAX_QUERIES + 1)]}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"routes": [route] * (MAX_ROUTES + 1)}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"extra": 1}))
    with pytest.raises(ValidationError):
        Plan(**(base | {"source": "other"}))
