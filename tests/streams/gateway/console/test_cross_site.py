"""A page from another origin, in Chromium, against a gateway without keys on loopback (the
real broker, Redis and workers): whatever it sends, it cannot add, flush, end, forget or
replay; the same write from the gateway's own page goes through."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright
from prometheus_client.parser import text_string_to_metric_families

from streams.stack.embedded import Child, Stack, free_port
from tests.streams.gateway.conftest import wait_ready
from tests.streams.gateway.console.test_browser import BROWSER_ARGS, chromium
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

NS = "cross-site"
EXCHANGE = {
    "session_id": "s1",
    "exchange_id": "planted",
    "turns": [{"role": "user", "speaker": "Eve", "content": "My password hint is the ferry."}],
}
# Every way a page elsewhere can make the browser write without a CORS grant, and two that
# need one (a JSON fetch and a DELETE), each reporting what the page could see of it.
ATTACK = """async (gw) => {
  const ns = `${gw}/v1/namespaces/cross-site`;
  const body = JSON.stringify({exchanges: [{session_id: "s1", exchange_id: "evil",
    turns: [{role: "user", speaker: "Eve", content: "I moved to Mars."}]}]});
  const tried = async (what, call) => {
    try { const r = await call(); return [what, r.type === "opaque" ? "opaque" : r.status]; }
    catch (e) { return [what, "blocked"]; }
  };
  const out = [];
  out.push(await tried("add text/plain", () =>
    fetch(`${ns}/exchanges`, {method: "POST", mode: "no-cors", body})));
  out.push(await tried("add as json", () => fetch(`${ns}/exchanges`, {method: "POST",
    headers: {"Content-Type": "application/json"}, body})));
  out.push(await tried("flush", () =>
    fetch(`${ns}/sessions/s1/flush`, {method: "POST", mode: "no-cors"})));
  out.push(await tried("end", () =>
    fetch(`${ns}/sessions/s1/end`, {method: "POST", mode: "no-cors"})));
  out.push(await tried("forget", () => fetch(ns, {method: "DELETE"})));
  out.push(await tried("replay", () => fetch(`${gw}/v1/dead-letters/replay`,
    {method: "POST", mode: "no-cors", body: JSON.stringify({topic: "memory.exchanges"})})));
  out.push(["beacon", navigator.sendBeacon(`${ns}/exchanges`, body) ? "queued" : "refused"]);
  return out;
}"""
FORM = """<!doctype html><form method="post" enctype="text/plain" action="{}">
<input name='{{"exchanges": [{{"session_id": "s1", "x": "' value='"}}]}}'></form>"""


@dataclass(frozen=True)
class Site:
    gateway: str  # no keys, loopback
    elsewhere: str  # another origin: the same address, another port


class Elsewhere(BaseHTTPRequestHandler):
    """Another origin's pages: a blank page to run scripts in, and a form aimed at `form_to`."""

    form_to = ""

    def do_GET(self) -> None:
        page = FORM.format(self.form_to) if self.path == "/form" else "<!doctype html><p>hi"
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    work = tmp_path_factory.mktemp("cross-site")
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LYCHEE_")}, **stack.env()}
    argv = [sys.executable, "-m", "streams.cli", "gateway", "--host", "127.0.0.1"]
    child = Child("open-gateway", [*argv, "--port", str(port)], work / "gateway.log", env)
    child.start()
    gateway = f"http://127.0.0.1:{port}"
    Elsewhere.form_to = f"{gateway}/v1/namespaces/{NS}/exchanges"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wait_ready(gateway, child)
        yield Site(gateway, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        child.stop()


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    executable = chromium()
    with tempfile.TemporaryDirectory(prefix="lychee-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=executable, args=BROWSER_ARGS, headless=True
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def searchable(gateway: str, exchange_ids: set[str]) -> set[str]:
    """Which of `exchange_ids` the namespace's raw turns hold."""
    r = httpx.get(f"{gateway}/v1/namespaces/{NS}/records", params={"turns": True}, timeout=60)
    assert r.status_code == 200, r.text
    return {x["exchange_id"] for x in r.json()["items"]} & exchange_ids


def refused_posts(gateway: str) -> int:
    """How many POSTs the gateway has refused as another site's (403) or not JSON (415)."""
    text = httpx.get(f"{gateway}/metrics", timeout=60).text
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "lychee_gateway_request_seconds_count"
            and sample.labels["method"] == "POST"
            and sample.labels["status"] in {"403", "415"}
        )
    )


def test_cross_site_page_cannot_add_flush_end_forget_or_replay(site: Site, page: Any) -> None:
    planted = httpx.post(
        f"{site.gateway}/v1/namespaces/{NS}/exchanges", json={"exchanges": [EXCHANGE]}, timeout=60
    )
    assert planted.status_code == 202, planted.text  # a client that is not a browser
    wait_until(
        lambda: searchable(site.gateway, {"planted"}),
        what="the planted exchange stored",
        until=bool,
        timeout_s=240,
        interval_s=0.5,
    )
    answered: list[tuple[str, str, int]] = []
    page.on(
        "response",
        lambda r: (
            answered.append((r.request.method, r.url, r.status))
            if r.url.startswith(site.gateway)
            else None
        ),
    )
    before = refused_posts(site.gateway)
    page.goto(f"{site.elsewhere}/")
    seen = dict(page.evaluate(ATTACK, site.gateway))
    assert seen == {
        "add text/plain": "opaque",  # sent; the page cannot read the answer
        "add as json": "blocked",  # its preflight is not granted
        "flush": "opaque",
        "end": "opaque",
        "forget": "blocked",
        "replay": "opaque",
        "beacon": "queued",
    }, seen
    page.goto(f"{site.elsewhere}/form")
    with page.expect_navigation(url=f"{site.gateway}/**") as navigated:
        page.locator("form").evaluate("form => form.submit()")
    assert navigated.value is not None and navigated.value.status == 415
    # What the browser sent, counted where it arrived: a beacon's answer never reaches the page.
    wait_until(
        lambda: refused_posts(site.gateway) - before,
        what="the no-cors add, flush, end, replay, beacon and form refused at the gateway",
        until=lambda n: n >= 6,
        timeout_s=60,
        interval_s=0.2,
    )
    refused = {status for _, _, status in answered}
    assert refused <= {403, 415}, answered
    status = httpx.get(f"{site.gateway}/v1/namespaces/{NS}/status", timeout=60).json()
    (session,) = status["sessions"]
    assert not session["ended"]  # neither flushed and ended by the page
    assert searchable(site.gateway, {"planted", "evil"}) == {"planted"}  # not forgotten, no add


def test_cross_site_the_gateways_own_page_writes(site: Site, page: Any) -> None:
    """The same JSON add from the gateway's own origin is accepted: the refusals above are
    the origin's, not a malformed request's."""
    page.goto(f"{site.gateway}/healthz")
    status = page.evaluate(
        """async (ns) => (await fetch(`v1/namespaces/${ns}/exchanges`, {method: "POST",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify({exchanges: [
          {session_id: "s2", exchange_id: "own", turns: [{role: "user", content: "hi"}]}]})
        })).status""",
        NS,
    )
    assert status == 202
