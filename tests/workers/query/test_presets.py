"""The query presets: one per ablation name, each the served one with switches off, and the
one a request names is the one it is served with."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, get_args

import pytest

from schemas.query import Ablation
from schemas.records import Temporal
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from tests.workers.query.test_service import request
from workers.query.presets import (
    ABLATIONS,
    NO_FUSION,
    NO_PLANNER,
    SERVED,
    QueryPreset,
    preset_for,
)
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

ROOT = Path(__file__).resolve().parents[3]
SWITCHES = {
    "planner",
    "fusion",
    "rerank",
    "second_stage",
    "bridge",
    "record_vector_only",
    "skip_nodes",
    "common_share",  # 0: off, where there is no planner's topic to search again
}


def test_presets_every_ablation_name_has_one() -> None:
    assert list(ABLATIONS) == list(get_args(Ablation))
    assert preset_for(None) is SERVED
    assert all(preset_for(name) is ABLATIONS[name] for name in get_args(Ablation))
    assert len(set(ABLATIONS.values())) == len(ABLATIONS)  # no two ablations alike


def test_presets_switches_are_what_a_preset_names_besides_its_constants() -> None:
    names = {f.name for f in fields(QueryPreset)}
    assert SWITCHES.issubset(names) and names - SWITCHES


@pytest.mark.parametrize("name", get_args(Ablation))
def test_presets_an_ablation_is_served_with_switches_off_and_the_same_constants(
    name: Ablation,
) -> None:
    preset = ABLATIONS[name]
    changed = {
        f.name for f in fields(QueryPreset) if getattr(preset, f.name) != getattr(SERVED, f.name)
    }
    assert changed <= SWITCHES
    assert changed - {"bridge"}  # it switches off a stage of its own
    assert not preset.bridge  # no ablation bridges a question's parts
    assert all(
        getattr(preset, s) is False
        for s in changed
        if s not in {"record_vector_only", "skip_nodes", "common_share"}
    )
    assert preset.common_share in (0.0, SERVED.common_share)


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    index_batches(
        s,
        [
            batch("a", 0, ["Ann adopted a puppy"], temporal=Temporal(t_ref="2024-03-02")),
            batch("a", 1, ["Ann visited Lisbon"], temporal=Temporal(t_ref="2024-06")),
        ],
        HashEmbedder(),
    )
    return s


def presets_seen(svc: QueryService) -> list[QueryPreset]:
    """The preset of every recall the service runs, in order."""
    seen: list[QueryPreset] = []
    recall = svc.recall.recall

    async def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw["preset"])
        return await recall(*args, **kw)

    svc.recall.recall = spy  # type: ignore[method-assign]
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize("name", get_args(Ablation))
async def test_presets_a_request_naming_an_ablation_is_served_with_its_preset(
    store: EvidenceStore, name: Ablation
) -> None:
    svc = QueryService(QueryDeps(store, HashEmbedder()))
    seen = presets_seen(svc)
    reply = await svc.search(request("a", "Where did Ann travel?", ablation=name))
    assert reply.status == "ok" and seen == [ABLATIONS[name]]


@pytest.mark.asyncio
async def test_presets_a_request_naming_none_is_served_with_the_services_default(
    store: EvidenceStore,
) -> None:
    svc = QueryService(QueryDeps(store, HashEmbedder()))
    seen = presets_seen(svc)
    await svc.search(request("a", "Where did Ann travel?"))
    assert seen and set(seen) == {SERVED}
    own = QueryService(QueryDeps(store, HashEmbedder()), preset=NO_PLANNER)
    seen = presets_seen(own)
    await own.search(request("a", "Where did Ann travel?"))
    await own.search(request("a", "Where did Ann travel?", ablation="no-fusion"))
    assert seen == [NO_PLANNER, NO_FUSION]


def _names_an_ablation(node: ast.AST, names: frozenset[str]) -> bool:
    """A string literal that is an ablation's name, or an f-string that builds one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in names
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return isinstance(first, ast.Constant) and str(first.value).startswith("no-")
    return False


def test_presets_workers_name_no_ablation_outside_the_presets() -> None:
    """Which stages run is read from a preset's fields, never from an ablation's name."""
    names = frozenset(get_args(Ablation))
    compared = re.compile(r"""[=!]=\s*f?["']no-""")
    found = []
    for path in sorted((ROOT / "workers").rglob("*.py")):
        if path == ROOT / "workers" / "query" / "presets.py":
            continue
        source = path.read_text()
        where = str(path.relative_to(ROOT))
        found += [
            f"{where}:{n.lineno}"
            for n in ast.walk(ast.parse(source))
            if _names_an_ablation(n, names)
        ]
        found += [f"{where}: {m.group()}" for m in compared.finditer(source)]
    assert found == []
