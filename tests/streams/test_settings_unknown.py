"""A LYCHEE_* variable that is no setting is named, with the setting it was likely meant as."""

from __future__ import annotations

from click.testing import CliRunner

from streams.cli import main
from streams.settings.unknown import known, unknown


def test_every_documented_variable_and_nested_field_is_known() -> None:
    names, nested = known()
    assert {"LYCHEE_TOPIC_PARTITIONS", "LYCHEE_MAX_MESSAGE_BYTES", "LYCHEE_SEGMENTER"} <= names
    assert "LYCHEE_SEGMENTER__DELTA" in nested
    assert unknown({n: "" for n in names | nested}) == []
    assert (
        unknown(
            {
                "LYCHEE_SEGMENTER__CALIBRATION__CENTER": "",
                "LYCHEE_SEGMENTER__CALIBRATIONS__MY_MODEL__SCALE": "",  # a mapping's own key
                "PATH": "",
                "LYCHEE_API_KEY": "",
            }
        )
        == []
    )


def test_a_typo_is_named_with_its_nearest_setting() -> None:
    assert unknown(
        {
            "LYCHEE_TOPIC_PARTITION": "3",
            "LYCHEE_SEGMENTER_DELTA": "0.5",
            "LYCHEE_SEGMENTER__DELTAA": "0.5",  # a nested field's name with more after it
            "LYCHEE_SEGMENTER__CALIBRATION__CENTRE": "0",
            "LYCHEE_ZZZ": "1",
        }
    ) == [
        "LYCHEE_SEGMENTER_DELTA is not a setting; did you mean LYCHEE_SEGMENTER__DELTA?",
        "LYCHEE_SEGMENTER__CALIBRATION__CENTRE is not a setting; "
        "did you mean LYCHEE_SEGMENTER__CALIBRATION__CENTER?",
        "LYCHEE_SEGMENTER__DELTAA is not a setting; did you mean LYCHEE_SEGMENTER__DELTA?",
        "LYCHEE_TOPIC_PARTITION is not a setting; did you mean LYCHEE_TOPIC_PARTITIONS?",
        "LYCHEE_ZZZ is not a setting",
    ]


def test_a_command_warns_once_per_unknown_variable_and_goes_on() -> None:
    out = CliRunner().invoke(main, ["gateway", "keys", "list"], env={"LYCHEE_TOPIC_PARTITION": "3"})
    assert out.output.splitlines() == [
        "warning: LYCHEE_TOPIC_PARTITION is not a setting; did you mean LYCHEE_TOPIC_PARTITIONS?",
        "Error: set LYCHEE_API_KEYS_FILE or pass --file",
    ]


def test_a_malformed_connection_setting_is_named_when_read() -> None:
    """A Redis URL or a store URI of no scheme the service can use fails at once, naming the
    variable, not at a worker's first connection."""
    for var, value in (("LYCHEE_REDIS_URL", "notaurl"), ("LYCHEE_LANCEDB_URI", "ftp://x/y")):
        out = CliRunner().invoke(main, ["gateway", "keys", "list"], env={var: value})
        assert out.exit_code != 0
        assert f"{var}: " in out.output and f"(got '{value}')" in out.output, out.output
    for var, value in (
        ("LYCHEE_REDIS_URL", "unix:///run/redis.sock"),
        ("LYCHEE_LANCEDB_URI", "data/x"),
    ):
        out = CliRunner().invoke(main, ["gateway", "keys", "list"], env={var: value})
        assert out.output.splitlines() == ["Error: set LYCHEE_API_KEYS_FILE or pass --file"]
