"""`lychee records --turns` dates each turn: by its session's date, else by its own."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from streams.cli.data import print_page


def test_a_turn_without_a_session_date_is_dated_by_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    turn = {"session_id": "s1", "seq": 0, "text": "Marta lives in Porto"}
    page = SimpleNamespace(
        total=2,
        page=1,
        page_size=50,
        pages=1,
        items=[
            turn | {"session_date": None, "created_at": datetime(2026, 12, 2, 16, tzinfo=UTC)},
            turn | {"session_date": datetime(2026, 11, 5, tzinfo=UTC), "created_at": None},
        ],
    )
    print_page(page, turns=True, where="namespace m", as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "[2026-12-02] s1 #0 Marta lives in Porto",
        "[2026-11-05] s1 #0 Marta lives in Porto",
    ]
