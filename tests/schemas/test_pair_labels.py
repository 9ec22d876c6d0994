"""An entity/topic pair's label and the two texts its vector is made of."""

from __future__ import annotations

import pytest

from schemas.records import pair_label, pair_parts


@pytest.mark.parametrize(
    ("entity", "topic"), [("Ann", "travel"), ("Falcon 3.1.2", "HTTP routes"), ("x", "y / z")]
)
def test_a_pair_label_splits_back_into_its_entity_and_topic(entity: str, topic: str) -> None:
    assert pair_parts(pair_label(entity, topic)) == (entity, topic)


def test_an_entity_holding_the_separator_splits_at_the_first_the_same_every_time() -> None:
    assert pair_parts(pair_label("CI / CD", "pipelines")) == ("CI", "CD / pipelines")


def test_a_label_without_a_separator_or_with_an_empty_side_stays_whole() -> None:
    assert pair_parts("solo") == ("solo",)
    assert pair_parts(" / travel") == ("travel",)
