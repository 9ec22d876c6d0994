"""Options several benchmarks share, declared once so that their flags and help agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

K = click.IntRange(1, 200)  # a request's k, as the query contract takes it
COUNT = click.IntRange(min=1)  # how many of something a run makes: at least one


class Counts(click.ParamType):
    """Comma-separated whole numbers within a range ("5,10,15"), checked before anything
    starts: a run that fails on them after its ingest throws away minutes of work."""

    name = "n,n,..."

    def __init__(self, low: int = 1, high: int | None = None) -> None:
        self.low, self.high = low, high

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> object:
        if isinstance(value, tuple):
            return value
        try:
            numbers = tuple(int(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r}: expected whole numbers like 5,10,15", param, ctx)
        top = "" if self.high is None else f" and at most {self.high}"
        if any(n < self.low or (self.high is not None and n > self.high) for n in numbers):
            self.fail(f"{value!r}: each must be at least {self.low}{top}", param, ctx)
        return numbers


# a data file that must exist (LoCoMo format unless the command says otherwise)
data_file = click.option(
    "--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
# ... read as LoCoMo or as JSON lines (`streams.bench.harness.data_format`)
data_format = click.option(
    "--format",
    "fmt",
    type=click.Choice(["locomo", "jsonl"]),
    default=None,
    help="default: jsonl for a .jsonl file, else locomo",
)


def judge_options(f: F) -> F:
    """The endpoint that grades answers by the LoCoMo judge protocol (default: the LLM's)."""
    f = click.option("--judge-model", default=None, help="default: LYCHEE_LLM_MODEL")(f)
    return click.option("--judge-base-url", default=None, help="default: LYCHEE_LLM_BASE_URL")(f)
