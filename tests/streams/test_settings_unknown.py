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
        unknown({"LYCHEE_SEGMENTER__CALIBRATION__BIAS": "", "PATH": "", "LYCHEE_API_KEY": ""}) == []
    )


def test_a_typo_is_named_with_its_nearest_setting() -> None:
    assert unknown(
        {"LYCHEE_TOPIC_PARTITION": "3", "LYCHEE_SEGMENTER_DELTA": "0.5", "LYCHEE_ZZZ": "1"}
    ) == [
        "LYCHEE_SEGMENTER_DELTA is not a setting; did you mean LYCHEE_SEGMENTER__DELTA?",
        "LYCHEE_TOPIC_PARTITION is not a setting; did you mean LYCHEE_TOPIC_PARTITIONS?",
        "LYCHEE_ZZZ is not a setting",
    ]


def test_a_command_warns_once_per_unknown_variable_and_goes_on() -> None:
    out = CliRunner().invoke(main, ["gateway", "keys", "list"], env={"LYCHEE_TOPIC_PARTITION": "3"})
    assert out.output.splitlines() == [
        "warning: LYCHEE_TOPIC_PARTITION is not a setting; did you mean LYCHEE_TOPIC_PARTITIONS?",
        "Error: set LYCHEE_API_KEYS_FILE or pass --file",
    ]
