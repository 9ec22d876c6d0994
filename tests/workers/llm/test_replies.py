"""Reading a model's JSON reply: what the stdlib would let through is refused."""

from __future__ import annotations

import pytest

from workers.llm.replies import json_object


@pytest.mark.parametrize("raw", ['{"a": "\\ud800"}', '{"a": "x \\udc00"}', '{"a": "\ud800"}'])
def test_json_object_lone_surrogate_is_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        json_object(raw)


def test_json_object_valid_surrogate_pair_is_kept() -> None:
    assert json_object('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
