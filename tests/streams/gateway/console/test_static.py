"""The console's files as served: the security headers, and nothing in them that could turn
memory text into markup or script, or fetch anything from elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from streams.gateway.app import create_app
from streams.gateway.auth import KeyRing
from streams.gateway.console import STATIC
from streams.settings import Settings

FILES = sorted(p for p in STATIC.rglob("*") if p.is_file())
SCRIPTS = [p for p in FILES if p.suffix == ".js"]


@pytest.fixture(scope="module")
def client() -> TestClient:
    # no `with`: the lifespan (broker, Redis) is not started; the console's files need neither
    return TestClient(create_app(Settings.load(None), KeyRing()), base_url="http://127.0.0.1")


def _served(path: Path) -> str:
    return "/console/" + path.relative_to(STATIC).as_posix()


def test_console_index_and_every_file_carry_a_csp_without_inline_script(client: TestClient) -> None:
    for url in ["/", *(_served(p) for p in FILES if p.name != "index.html")]:
        r = client.get(url)
        assert r.status_code == 200, url
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, url
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="console/js/main.js">' in client.get("/").text
    assert client.get("/console/js/main.js").headers["content-type"].startswith("text/javascript")


def test_console_index_has_no_inline_script_style_or_handler() -> None:
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []  # every script is a file
    assert re.findall(r"\son[a-z]+\s*=", html) == [] and "style=" not in html
    assert "<style" not in html


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_console_script_builds_no_markup_from_text(path: Path) -> None:
    code = path.read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setTimeout("',
        "srcdoc",
        "DOMParser",
    ):
        assert sink not in code, f"{path.name} uses {sink}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_console_file_loads_nothing_from_the_network(path: Path) -> None:
    text = path.read_text()
    # the only absolute URL allowed is the SVG namespace, an identifier that is never fetched
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}", text)) - {"http://www.w3.org"}
    assert urls == set(), path.name
    assert "@import" not in text


def test_console_without_keys_needs_none_and_with_keys_serves_files_but_not_data(
    tmp_path: Path,
) -> None:
    from streams.gateway.auth import add_key

    add_key(tmp_path / "keys.json", "a", ["a"])
    keyed = TestClient(create_app(Settings.load(None), KeyRing.load(tmp_path / "keys.json")))
    assert keyed.get("/").status_code == 200  # the page asks for the key itself
    for route in ("/v1/whoami", "/v1/namespaces", "/v1/operations"):
        assert keyed.get(route).status_code == 401, route
