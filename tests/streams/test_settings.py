"""Settings come from LYCHEE_* variables; a .env file never overrides a real one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas import SegmentMode
from schemas.records import NodeType
from streams.settings import Settings


def test_settings_env_file_fills_gaps_but_never_overrides_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("LYCHEE_REDIS_URL=redis://from-dotenv:1/0\nLYCHEE_TOPIC_PARTITIONS=3\n")
    monkeypatch.setenv("LYCHEE_REDIS_URL", "redis://from-env:2/0")
    monkeypatch.setenv("LYCHEE_SEGMENTER__MODE", "eager")
    monkeypatch.setenv("LYCHEE_SEGMENTER__DELTA", "0.6")
    s = Settings(_env_file=env_file)  # type: ignore[call-arg]
    assert s.redis_url == "redis://from-env:2/0"
    assert s.topic_partitions == 3
    assert s.segmenter.mode is SegmentMode.eager and s.segmenter.delta == 0.6


def test_settings_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYCHEE_TOPIC_PARTITIONS", "zero")
    with pytest.raises(ValueError, match="topic_partitions"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_settings_query_ablation_accepts_the_paper_ablations_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LYCHEE_QUERY_ABLATION", "no-fusion")
    assert Settings().query_ablation == "no-fusion"
    monkeypatch.setenv("LYCHEE_QUERY_ABLATION", "no-rerank")
    with pytest.raises(ValidationError, match="query_ablation"):
        Settings()


def test_settings_index_node_types_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().index_node_types == frozenset(NodeType)
    monkeypatch.setenv("LYCHEE_INDEX_NODE_TYPES", "entity, topic,event_frame")
    assert Settings().index_node_types == {NodeType.entity, NodeType.topic, NodeType.event_frame}
    monkeypatch.setenv("LYCHEE_INDEX_NODE_TYPES", "entity,people")
    with pytest.raises(ValidationError, match="index_node_types"):
        Settings()


def test_settings_request_limit_below_four_input_sizes_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LYCHEE_MAX_MESSAGE_BYTES", "4194304")  # 4 MiB in, 8 MiB out: no room
    with pytest.raises(ValidationError, match="kafka_max_request_bytes .* at least 4x"):
        Settings(_env_file=None)  # type: ignore[call-arg]
    monkeypatch.setenv("LYCHEE_KAFKA_MAX_REQUEST_BYTES", "16777216")
    assert Settings(_env_file=None).max_message_bytes == 4194304  # type: ignore[call-arg]
