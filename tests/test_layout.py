"""The layout rules a newcomer relies on (issue 28): small modules, short functions, imports
that point one way without circles, and a `streams/` folder that stays scannable."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "workers", "streams")
CLIENT = ROOT / "clients" / "python"  # `lychee_client`, its own distribution
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_TOP_LEVEL_MODULES = 12


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))
    yield from sorted((CLIENT / "lychee_client").rglob("*.py"))


def module_name(path: Path) -> str:
    base = CLIENT if path.is_relative_to(CLIENT) else ROOT
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_layout_no_product_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_layout_no_function_is_over_80_lines() -> None:
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = (node.end_lineno or node.lineno) - first + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = n
    assert long == {}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports, at any depth of the file (lazy imports count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from package import submodule` imports the submodule, not a name of the package
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [n for n in subs if n in known]
            if len(names) < len(subs):
                names.append(node.module)
        found.update(n for n in names if n in known)
    return found


def test_layout_no_import_circle() -> None:
    import graphlib

    paths = {module_name(p): p for p in modules()}
    known = set(paths)
    graph = {name: imports_of(path, known) - {name} for name, path in paths.items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_layout_imports_point_one_way() -> None:
    paths = {module_name(p): p for p in modules()}
    known = set(paths)
    allowed = {
        "schemas": {"schemas"},
        "workers": {"schemas", "workers"},
        "lychee_client": {"schemas", "lychee_client"},  # installs without the service
    }
    wrong = [
        f"{name} imports {target}"
        for name, path in paths.items()
        if (top := name.split(".")[0]) in allowed
        for target in imports_of(path, known)
        if target.split(".")[0] not in allowed[top]
    ]
    assert wrong == []


def test_layout_the_product_never_imports_the_research_instruments() -> None:
    """Research instruments live in tests/evals: they import the product, never the reverse."""
    wrong = [
        f"{module_name(path)} imports {name}"
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [f"{node.module}.{a.name}" for a in node.names]
        )
        if name == "tests.evals" or name.startswith("tests.evals.")
    ]
    assert wrong == []


def test_layout_streams_holds_at_most_12_modules_beside_its_folders() -> None:
    top = [p.name for p in (ROOT / "streams").glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(top)


def test_layout_tests_mirror_the_tree() -> None:
    """Every test folder under tests/<package>/ names a folder of that package."""
    strays = [
        str(d.relative_to(ROOT))
        for package in PACKAGES
        for d in (ROOT / "tests" / package).rglob("*")
        if d.is_dir()
        and d.name != "__pycache__"
        and not (ROOT / d.relative_to(ROOT / "tests")).is_dir()
    ]
    assert strays == []
