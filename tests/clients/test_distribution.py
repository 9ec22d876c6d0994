"""The client's own distribution (clients/python) installs alone: a fresh virtualenv holding
only its wheel and what it needs (httpx, pydantic) imports it, has no Kafka, Faust, torch or
model in reach, and talks to a real gateway."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib.metadata import distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.clients.conftest import Gateway

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
ABSENT = ["faust", "aiokafka", "torch", "lancedb", "redis", "streams", "workers", "langgraph"]

PROBE = """
import importlib.util, json, os, sys
from lychee_client import ExchangeIn, LycheeClient, Turn

absent = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]
with LycheeClient(os.environ["URL"], "cl-slim", api_key=os.environ["KEY"]) as client:
    receipt = client.add([ExchangeIn(session_id="s", turns=[Turn(role="user", content="hi")])])
    client.wait_indexed(receipt)
    turns = [t["content"] for t in client.all_turns("s")]
    client.forget("s")
print(json.dumps({"absent": absent, "turns": turns}))
"""


def run(*argv: str | Path, **kw: object) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, done.stderr[-3000:]
    return str(done.stdout)


def wheel_requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(meta).decode()).get_all("Requires-Dist") or []


def locked_closure(requirements: list[str]) -> list[str]:
    """`requirements` and everything they need, pinned to the versions this environment holds
    (the lock's). Installed with `--no-deps`, these need no package metadata, which an offline
    uv lacks when its cache was filled by `uv pip sync` (wheels only)."""
    pins: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()  # (distribution, extra) taken
    todo = [(Requirement(r), "") for r in requirements]  # with the extra that asks for it
    while todo:
        req, extra = todo.pop()
        name = canonicalize_name(req.name)
        wanted = {(name, e) for e in ["", *req.extras]} - seen
        if not wanted or (req.marker is not None and not req.marker.evaluate({"extra": extra})):
            continue
        seen |= wanted
        dist = distribution(name)
        pins[name] = f"{name}=={dist.version}"
        todo += [(Requirement(r), e) for _, e in wanted for r in dist.requires or []]
    return sorted(pins.values())


def test_client_distribution_installs_alone_without_kafka_or_models(
    gateway: Gateway, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    # setuptools builds through clients/python/build: a file left there by an earlier build
    # of since-removed code would ship
    shutil.rmtree(ROOT / "clients" / "python" / "build", ignore_errors=True)
    # built with the lock's setuptools (no build isolation: offline)
    run(UV, "build", "--wheel", "--no-build-isolation", "--python", sys.executable,
        "-o", wheels, ROOT / "clients" / "python")  # fmt: skip
    (wheel,) = wheels.glob("lychee_memory_client-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if ".dist-info/" not in n]
        tops = {n.split("/")[0] for n in names}
        shipped = {n: zf.read(n) for n in names if n.startswith("schemas/")}
    assert tops == {"lychee_client", "schemas"}
    assert shipped == {  # the repository's contracts themselves
        f"schemas/{p.name}": p.read_bytes() for p in (ROOT / "schemas").glob("*.py")
    }
    client = ROOT / "clients" / "python" / "lychee_client"
    assert {n for n in names if n.startswith("lychee_client/")} == {
        f"lychee_client/{p.name}" for p in client.glob("*.py")
    }
    venv = tmp_path / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    # the lock's versions of what the wheel needs, from uv's cache (`make install` filled it)
    run(UV, "pip", "install", "--offline", "--no-deps", "--python", python,
        wheel, *locked_closure(wheel_requirements(wheel)))  # fmt: skip
    installed = {
        line.split("==")[0].split(" @ ")[0].lower()
        for line in run(UV, "pip", "freeze", "--python", python).splitlines()
    }
    assert {"lychee-memory-client", "httpx", "pydantic"} <= installed
    assert not installed & {"faust-streaming", "aiokafka", "torch", "lancedb", "redis"}
    env = {**os.environ, "URL": gateway.url, "KEY": gateway.key}
    env.pop("PYTHONPATH", None)
    out = json.loads(run(python, "-I", "-c", PROBE, *ABSENT, env=env, cwd=tmp_path))
    assert out == {"absent": ABSENT, "turns": ["hi"]}
