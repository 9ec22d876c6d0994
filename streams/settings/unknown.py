"""`LYCHEE_*` variables that name no setting: a typo (`LYCHEE_TOPIC_PARTITION`) is otherwise
ignored without a word, and the service runs with the default the user meant to change."""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from streams.settings import Settings
from streams.settings.group import PREFIX

NESTED = "__"  # a nested field: LYCHEE_SEGMENTER__DELTA
# read elsewhere than the settings: the key the README's client examples take, and the test
# harness's own
ELSEWHERE = frozenset(
    {
        "LYCHEE_API_KEY",
        "LYCHEE_CHROMIUM",
        "LYCHEE_CONSOLE_SCREENSHOTS",
        "LYCHEE_TEST_READY_TIMEOUT_S",
    }
)


@functools.cache  # the settings' fields: fixed for the process
def known() -> tuple[frozenset[str], frozenset[str]]:
    """Every variable of the settings, and every nested field's (`LYCHEE_SEGMENTER__DELTA`,
    `LYCHEE_SEGMENTER__CALIBRATION__BIAS`), at any depth."""
    names: set[str] = set()
    nested: set[str] = set()
    for group in Settings.model_fields.values():
        assert group.annotation is not None
        for env, info in group.annotation.variables():
            names.add(env)
            nested |= set(_fields(env, info.annotation))
    return frozenset(names), frozenset(nested)


def _fields(env: str, kind: object) -> Iterable[str]:
    """The variables of a model-typed setting's fields, and theirs (`Model | None` too); a
    mapping's keys are the user's, so its own variables are not listed (`strays`)."""
    union = typing.get_origin(kind) in (typing.Union, types.UnionType)
    for model in typing.get_args(kind) if union else (kind,):
        if isinstance(model, type) and issubclass(model, BaseModel):
            for field, info in model.model_fields.items():
                name = f"{env}{NESTED}{field.upper()}"
                yield name
                if typing.get_origin(info.annotation) is dict:
                    yield f"{name}{NESTED}*"
                yield from _fields(name, info.annotation)


def unknown(environ: Mapping[str, str]) -> list[str]:
    """One line per `LYCHEE_*` variable of `environ` that is no setting, with the nearest
    one's name when there is a near one."""
    names, nested = known()
    lines = []
    for var in strays(environ):
        near = difflib.get_close_matches(var, _all(names, nested), n=1, cutoff=0.8)
        lines.append(f"{var} is not a setting" + (f"; did you mean {near[0]}?" if near else ""))
    return lines


def strays(environ: Mapping[str, str]) -> list[str]:
    """The `LYCHEE_*` variables of `environ` that no setting and nothing else reads."""
    names, nested = known()
    return sorted(
        v
        for v in environ
        if v.startswith(PREFIX)
        and v not in names
        and v not in ELSEWHERE
        and v not in nested
        and not any(v.startswith(n[:-1]) for n in nested if n.endswith(f"{NESTED}*"))
    )


def _all(names: Iterable[str], nested: Iterable[str]) -> list[str]:
    return sorted({*names, *(n for n in nested if not n.endswith("*"))})
