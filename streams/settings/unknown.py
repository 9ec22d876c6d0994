"""`LYCHEE_*` variables that name no setting: a typo (`LYCHEE_TOPIC_PARTITION`) is otherwise
ignored without a word, and the service runs with the default the user meant to change."""

from __future__ import annotations

import difflib
import functools
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
    """Every variable of the settings, and the prefixes of nested ones."""
    names: set[str] = set()
    nested: set[str] = set()
    for group in Settings.model_fields.values():
        assert group.annotation is not None
        for env, info in group.annotation.variables():
            names.add(env)
            kind = info.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                nested |= {f"{env}{NESTED}{field.upper()}" for field in kind.model_fields}
    return frozenset(names), frozenset(nested)


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
        and not any(v.startswith(n) for n in nested)
    )


def _all(names: Iterable[str], nested: Iterable[str]) -> list[str]:
    return sorted({*names, *nested})
