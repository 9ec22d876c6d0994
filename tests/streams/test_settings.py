"""Settings come from LYCHEE_* variables; a .env file never overrides a real one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from schemas import SegmentMode
from schemas.records import NodeType
from streams.settings import Settings
from streams.settings.table import table, written_table


def test_settings_env_file_fills_gaps_but_never_overrides_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("LYCHEE_REDIS_URL=redis://from-dotenv:1/0\nLYCHEE_TOPIC_PARTITIONS=3\n")
    monkeypatch.setenv("LYCHEE_REDIS_URL", "redis://from-env:2/0")
    monkeypatch.setenv("LYCHEE_SEGMENTER__MODE", "eager")
    monkeypatch.setenv("LYCHEE_SEGMENTER__DELTA", "0.6")
    s = Settings.load(env_file)
    assert s.redis.url == "redis://from-env:2/0"
    assert s.kafka.topic_partitions == 3
    assert s.segmenter.params.mode is SegmentMode.eager and s.segmenter.params.delta == 0.6


def test_settings_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LYCHEE_TOPIC_PARTITIONS", "zero")
    with pytest.raises(ValueError, match="LYCHEE_TOPIC_PARTITIONS"):
        Settings.load(None)


def test_settings_query_ablation_accepts_the_paper_ablations_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LYCHEE_QUERY_ABLATION", "no-fusion")
    assert Settings().query.ablation == "no-fusion"
    monkeypatch.setenv("LYCHEE_QUERY_ABLATION", "no-rerank")
    with pytest.raises(ValidationError, match="LYCHEE_QUERY_ABLATION"):
        Settings()


def test_settings_index_node_types_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().indexer.node_types == frozenset(NodeType)
    monkeypatch.setenv("LYCHEE_INDEX_NODE_TYPES", "entity, topic,event_frame")
    assert Settings().indexer.node_types == {NodeType.entity, NodeType.topic, NodeType.event_frame}
    monkeypatch.setenv("LYCHEE_INDEX_NODE_TYPES", "entity,people")
    with pytest.raises(ValidationError, match="LYCHEE_INDEX_NODE_TYPES"):
        Settings()


def test_settings_request_limit_below_four_input_sizes_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LYCHEE_MAX_MESSAGE_BYTES", "4194304")  # 4 MiB in, 8 MiB out: no room
    with pytest.raises(ValidationError, match="LYCHEE_KAFKA_MAX_REQUEST_BYTES .* at least 4x"):
        Settings.load(None)
    monkeypatch.setenv("LYCHEE_KAFKA_MAX_REQUEST_BYTES", "16777216")
    assert Settings.load(None).kafka.max_message_bytes == 4194304


def test_settings_every_group_reads_its_variables_by_their_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each variable reaches its group's field: by the group's rule or the field's own name."""
    for env, value in {
        "LYCHEE_KAFKA_BOOTSTRAP": "k:1",
        "LYCHEE_SYSTEMIC_STREAK": "7",
        "LYCHEE_LANCEDB_URI": "s3://b/p",
        "LYCHEE_EXACT_SEARCH_MAX_ROWS": "5",
        "LYCHEE_EMBEDDING_BATCH_SIZE": "3",
        "OPENAI_API_KEY": "sk-x",
        "LYCHEE_SEGMENTER_BATCH_SIZE": "9",
        "LYCHEE_IDLE_TIMEOUT_S": "2",
        "LYCHEE_TURN_WINDOW": "2",
        "LYCHEE_GATEWAY_PORT": "81",
        "LYCHEE_RESTART_MAX_CRASHES": "4",
        "LYCHEE_LOG_FORMAT": "json",
    }.items():
        monkeypatch.setenv(env, value)
    s = Settings.load(None)
    assert (s.kafka.bootstrap, s.kafka.systemic_streak) == ("k:1", 7)
    assert (s.store.uri, s.store.exact_search_max_rows) == ("s3://b/p", 5)
    assert s.embedding.batch_size == 3
    assert s.llm.api_key is not None and s.llm.api_key.get_secret_value() == "sk-x"
    assert (s.segmenter.batch_size, s.segmenter.idle_timeout_s) == (9, 2.0)
    assert (s.query.turn_window, s.gateway.port) == (2, 81)
    assert (s.stack.restart_max_crashes, s.observability.log_format) == (4, "json")


def test_settings_no_two_fields_share_a_variable() -> None:
    names = [env for _, group in Settings.model_fields.items() for env, _ in _variables(group)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def _variables(group: FieldInfo) -> list[tuple[str, FieldInfo]]:
    assert group.annotation is not None
    return list(group.annotation.variables())


def test_settings_every_variable_says_what_it_does() -> None:
    silent = [
        env
        for _, group in Settings.model_fields.items()
        for env, info in _variables(group)
        if not info.description
    ]
    assert silent == []


def test_settings_replaced_validates_and_keeps_the_rest() -> None:
    s = Settings.load(None, gateway={"port": 81})
    t = s.replaced(stack={"drain_grace_s": 5})
    assert (t.stack.drain_grace_s, t.gateway.port) == (5, 81)
    with pytest.raises(ValidationError, match="drain_grace_s"):
        s.replaced(stack={"drain_grace_s": -1})
    with pytest.raises(ValueError, match="no settings group stacks"):
        s.replaced(stacks={"drain_grace_s": 5})


def test_settings_table_is_written_from_the_models() -> None:
    """`python -m streams.settings.table --write docs/configuration.md` after changing a
    setting."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert written_table(doc) == table()


def test_settings_an_llm_half_configured_is_said_and_a_url_without_its_scheme_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Either alone left the LLM path off without a word (either has its uses: remote
    embeddings at the LLM's URL, a judge model on the command line); a URL without its
    scheme failed at the first call."""
    monkeypatch.setenv("LYCHEE_LLM_BASE_URL", "HTTP://127.0.0.1:8091/v1")
    half = Settings().llm
    assert not half.configured and half.half_said is not None
    assert half.half_said.startswith("LYCHEE_LLM_BASE_URL is set but LYCHEE_LLM_MODEL is not")
    monkeypatch.setenv("LYCHEE_LLM_MODEL", "qwen")
    assert Settings().llm.configured and Settings().llm.half_said is None
    monkeypatch.setenv("LYCHEE_LLM_BASE_URL", "127.0.0.1:8091")
    with pytest.raises(ValidationError, match="must be an http:// or https:// URL"):
        Settings()
