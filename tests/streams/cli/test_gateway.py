"""`lychee gateway keys`: a pattern that would grant more than it reads is refused with why."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from streams.cli import main


def test_keys_add_refuses_a_star_without_a_separator_and_says_why(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    out = CliRunner().invoke(
        main, ["gateway", "keys", "add", "acme", "--namespace", "acme*", "--file", str(keys)]
    )
    assert out.exit_code != 0 and not keys.exists()
    assert "'acmecorp'" in out.output and "'acme-*'" in out.output, out.output
    out = CliRunner().invoke(
        main, ["gateway", "keys", "add", "acme", "--namespace", "acme-*", "--file", str(keys)]
    )
    assert out.exit_code == 0 and out.output.startswith("lyk_"), out.output
