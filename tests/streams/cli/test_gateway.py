"""`lychee gateway keys`: a pattern that would grant more than it reads is refused with why."""

from __future__ import annotations

from pathlib import Path

import pytest
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


@pytest.mark.parametrize(
    ("name", "pattern", "said"),
    [
        ("", "acme", "a key's name must be 1-128 characters"),
        ("x: hw\nroot", "acme", "a key's name must be 1-128 characters"),  # a forged list line
        ("bad name/../x", "acme", "(got 'bad name/../x')"),
        ("k", "a b", "'a b' matches no namespace"),
        ("k", "x/*", "'x/*' matches no namespace"),
        ("k", "-*", "'-*' matches no namespace"),
    ],
)
def test_keys_add_refuses_a_key_that_opens_nothing(
    tmp_path: Path, name: str, pattern: str, said: str
) -> None:
    keys = tmp_path / "keys.json"
    args = ["gateway", "keys", "add", name, "--namespace", pattern, "--file", str(keys)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code != 0 and not keys.exists() and said in out.output, out.output
