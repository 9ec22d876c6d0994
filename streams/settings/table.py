"""The configuration table (docs/configuration.md), written from the settings models.

`python -m streams.settings.table` prints it; `--write docs/configuration.md` replaces the
table between the file's markers. A test fails when the file and the models differ.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from streams.settings import Settings

BEGIN = "<!-- settings table: python -m streams.settings.table --write docs/configuration.md -->"
END = "<!-- end of settings table -->"


def table() -> str:
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, group in Settings.model_fields.items():
        assert group.annotation is not None
        about = (group.annotation.__doc__ or "").split("\n\n")[0].replace("\n", " ").strip()
        lines.append(f"| **{name}**: {about} | | |")
        lines += (f"| `{env}` | {_default(info)} | {_text(info)} |" for env, info in _rows(group))
    return "\n".join(lines) + "\n"


def _rows(group: FieldInfo) -> Iterator[tuple[str, FieldInfo]]:
    assert group.annotation is not None
    yield from group.annotation.variables()


def _default(info: FieldInfo) -> str:
    value: Any = info.default
    if value is PydanticUndefined and info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "see its module"
    if value is None:
        return "unset"
    if isinstance(value, frozenset | set):
        return (
            "`"
            + ",".join(sorted(v.value if isinstance(v, enum.Enum) else str(v) for v in value))
            + "`"
        )
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def _text(info: FieldInfo) -> str:
    """The description; its links name files from the project's root, the table lives in
    docs/."""
    return (info.description or "").replace("|", "\\|").replace("](docs/", "](")


def write(path: Path) -> None:
    text = path.read_text()
    head, found, rest = text.partition(BEGIN)
    _, ended, tail = rest.partition(END)
    if not (found and ended):
        raise SystemExit(f"{path}: no settings table markers ({BEGIN} ... {END})")
    path.write_text(f"{head}{BEGIN}\n{table()}{END}{tail}")


def written_table(path: Path) -> str:
    """The table between the markers of `path`, as `table()` writes it."""
    _, _, rest = path.read_text().partition(BEGIN)
    return rest.partition(END)[0].removeprefix("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace the table in this file")
    args = parser.parse_args()
    if args.write:
        write(args.write)
    else:
        print(table(), end="")


if __name__ == "__main__":
    main()
