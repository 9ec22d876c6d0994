"""Options several benchmarks share, declared once so that their flags and help agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

# a data file that must exist (LoCoMo format unless the command says otherwise)
data_file = click.option(
    "--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)


def judge_options(f: F) -> F:
    """The endpoint that grades answers by the LoCoMo judge protocol (default: the LLM's)."""
    f = click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")(f)
    return click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")(f)
