"""The console in a real browser (Debian's chromium driven by Playwright) against a real
`lychee up`: a conversation goes in; its timeline shows turns, segments and records; a search
shows its evidence and plan; a key for one namespace sees no other; hostile exchanges render
as text; dead letters are shown by reason and replayed, once, and no other origin can make
the browser replay them; forget removes a namespace from every page (issue 27).

One stack, one keyed gateway beside it and one browser serve every test of this module; the
tests run in file order and the forget tests come last. With LYCHEE_CONSOLE_SCREENSHOTS set
to a directory, the timeline and search tests save the README's screenshots there
(`make screenshots`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from playwright.sync_api import expect, sync_playwright

from streams.gateway.auth import add_key
from streams.stack.embedded import Child, free_port
from streams.stack.ready import wait_workers
from streams.stack.up_process import UpProcess
from tests.streams.gateway.conftest import wait_ready
from tests.streams.gateway.dead_letters import (
    UNPARSEABLE_TEXT,
    exchange,
    failed_exchange,
    unparseable,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[4]
DEMO = ROOT / "deploy" / "demo" / "conversation.jsonl"
DEMO_NS, HOSTILE_NS, ALICE_NS = "console-demo", "console-hostile", "console-alice"
CHANGES_NS = "console-changes"
TOOLS_NS = "console-tools"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# each payload calls alert (a dialog) and sets a flag: either would show it ran
HOSTILE = [
    '<script>alert("s");window.__pwned="script"</script> I sail a <b>dinghy</b> on weekends.',
    "<img src=x onerror=\"alert('i');window.__pwned='img'\"> The dinghy is called Petrel.",
    "Read <a href=\"javascript:alert('a');window.__pwned='link'\">the sailing log</a> or "
    "[the club page](javascript:alert('m')) about the dinghy.",
]
SPEAKER = "<img src=y onerror=\"window.__pwned='speaker'\">Mallory"


def chromium() -> str:
    path = os.environ.get("LYCHEE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        message = "no chromium: `make browser` installs Debian's package"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@dataclass(frozen=True)
class Console:
    url: str  # the console of `lychee up` (no keys: loopback only)
    keyed_url: str  # a gateway with API keys on the same stack
    keys: dict[str, str]
    bootstrap: str


def exchanges_of(path: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        item = orjson.loads(line)
        out.setdefault(item.pop("namespace"), []).append(item)
    return out


def hostile() -> list[dict[str, Any]]:
    return [
        {
            "session_id": "h1",
            "session_date": "2024-05-04T10:00:00",
            "turns": [{"role": "user", "speaker": SPEAKER, "content": text}],
        }
        for text in HOSTILE
    ]


def alice() -> list[dict[str, Any]]:
    return [
        {
            "session_id": "a1",
            "turns": [
                {
                    "role": "user",
                    "speaker": "Alice",
                    "content": "My cello teacher moved to Ghent in June.",
                }
            ],
        },
        {
            "session_id": "a1",
            "turns": [
                {
                    "role": "user",
                    "speaker": "Alice",
                    "content": "Lessons are now on video calls on Tuesdays.",
                }
            ],
        },
    ]


def changes() -> list[dict[str, Any]]:
    """A value said, then changed a month later (the indexer's rules link the two)."""
    said = [
        ("c1", "2024-03-01T10:00:00", "The greenhouse heater draws 900 watts on cold nights."),
        ("c2", "2024-04-02T10:00:00", "The greenhouse heater now draws 650 watts at night."),
    ]
    return [
        {
            "session_id": sid,
            "session_date": when,
            "turns": [{"role": "user", "speaker": "Ana", "content": text}],
        }
        for sid, when, text in said
    ]


def agent_run() -> list[dict[str, Any]]:
    """A question, the tool call it led to and its output (not memory), then the answer."""
    tool = {"role": "assistant", "speaker": "agents-item", "memory": False}
    return [
        {"session_id": "r1", "turns": [{"role": "user", "content": "Which trail is open?"}]},
        {"session_id": "r1", "turns": [{**tool, "content": '{"call": "trail_status"}'}]},
        {"session_id": "r1", "turns": [{"role": "assistant", "content": "The ridge trail."}]},
    ]


def ingest(url: str, ns: str, exchanges: list[dict[str, Any]]) -> None:
    """Add and end each session, then wait until every turn sits in a segment."""
    with httpx.Client(base_url=url, timeout=120) as c:
        r = c.post(f"/v1/namespaces/{ns}/exchanges", json={"exchanges": exchanges})
        assert r.status_code == 202, r.text
        sessions = sorted({x["session_id"] for x in exchanges})
        for sid in sessions:
            assert c.post(f"/v1/namespaces/{ns}/sessions/{sid}/end").status_code == 202

        def unconsolidated() -> dict[str, str]:
            """Each session with no turn yet or a turn outside any segment: its timeline."""
            left = {}
            for sid in sessions:
                r = c.get(f"/v1/namespaces/{ns}/sessions/{sid}/timeline", params={"page_size": 500})
                turns = r.json()["turns"] if r.status_code == 200 else []
                if not (turns and all(t["segment_id"] for t in turns)):
                    left[sid] = r.text[:500]
            return left

        wait_until(
            unconsolidated,
            what=f"every session of {ns} consolidated",
            until=lambda left: not left,
            timeout_s=300,
            interval_s=0.5,
        )


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("console")
    up = UpProcess.start(root / "data", root / "state", "--ephemeral")
    keyed: Child | None = None
    try:
        up.endpoints(timeout_s=600)  # written once its gateway listens: slow on a busy machine
        asyncio.run(wait_workers(up.settings(), 600, up.check))
        printed = re.search(r"console (http://127\.0\.0\.1:\d+)/", up.output())
        assert printed, up.output()  # `lychee up` prints the console's URL
        url = printed.group(1)
        keys_file = root / "keys.json"
        keys = {
            "all": add_key(keys_file, "all", ["*"]),
            "alice": add_key(keys_file, "alice", [ALICE_NS]),
        }
        endpoints = up.endpoints()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("LYCHEE_")},
            "XDG_STATE_HOME": str(up.state_dir),
            "LYCHEE_API_KEYS_FILE": str(keys_file),
            "LYCHEE_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
            "LYCHEE_KAFKA_IDEMPOTENCE": "false",
            "LYCHEE_REDIS_URL": endpoints.redis_url,
            "LYCHEE_LANCEDB_URI": endpoints.lancedb_uri,
            "LYCHEE_LOG_LEVEL": "WARNING",
        }
        port = free_port()
        keyed = Child(
            "keyed-gateway",
            [
                sys.executable,
                "-m",
                "streams.cli",
                "gateway",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            root / "keyed-gateway.log",
            env,
        )
        keyed.start()
        keyed_url = f"http://127.0.0.1:{port}"
        wait_ready(url, up)
        (demo,) = exchanges_of(DEMO).values()
        ingest(url, DEMO_NS, demo)
        ingest(url, HOSTILE_NS, hostile())
        ingest(url, ALICE_NS, alice())
        ingest(url, CHANGES_NS, changes())
        ingest(url, TOOLS_NS, agent_run())
        wait_ready(keyed_url, keyed, timeout_s=600)
        yield Console(url, keyed_url, keys, endpoints.kafka_bootstrap)
    finally:
        if keyed is not None:
            keyed.stop()
        with contextlib.suppress(subprocess.TimeoutExpired):
            up.interrupt(timeout_s=120)  # Ctrl-C, as a user stops it
        up.cleanup()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    expect.set_options(timeout=60_000)  # a loaded machine renders slowly
    executable = chromium()
    with tempfile.TemporaryDirectory(prefix="lychee-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            args=BROWSER_ARGS,
            headless=True,
            viewport={"width": 1360, "height": 900},
            service_workers="block",
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Watched:
    """A page and what it must not do: open a dialog, throw, or fetch from elsewhere."""

    page: Any
    dialogs: list[str]
    errors: list[str]
    requests: list[str]

    def clean(self) -> None:
        assert self.dialogs == [] and self.errors == []
        assert all(u.startswith("http://127.0.0.1:") for u in self.requests), self.requests


@pytest.fixture
def tab(browser: Any) -> Iterator[Watched]:
    """A new tab: no key in its session storage."""
    page = browser.new_page()
    seen = Watched(page, [], [], [])
    page.on("dialog", lambda d: (seen.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen.errors.append(str(e)))
    page.on("request", lambda r: seen.requests.append(r.url))
    try:
        yield seen
    finally:
        page.close()


SETTLED = """() => { const view = document.getElementById('view');
    return view && view.dataset.rendered === (location.hash || '#/'); }"""


def settle(page: Any) -> None:
    """Wait until the console shows the page its address names (main.js marks it)."""
    page.wait_for_function(SETTLED, timeout=120_000)


def visit(page: Any, url: str) -> Any:
    response = page.goto(url)
    settle(page)
    return response


def shoot(page: Any, name: str) -> None:
    where = os.environ.get("LYCHEE_CONSOLE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / name))


def test_console_namespaces_page_lists_rows_per_namespace(console: Console, tab: Watched) -> None:
    page = tab.page
    response = visit(page, console.url + "/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    row = page.locator("table.namespaces tr", has_text=DEMO_NS)
    expect(row).to_contain_text("28")  # the demo's turns
    expect(row.locator(".badge")).to_have_text("searchable")
    expect(page.locator("table.namespaces tbody tr")).to_have_count(5)
    tab.clean()


def test_console_a_malformed_link_shows_its_error_and_the_next_page_renders(
    console: Console, tab: Watched
) -> None:
    page = tab.page
    visit(page, console.url + "/#/ns/%ZZ")
    expect(page.locator("#view .error")).to_contain_text("URI malformed")
    visit(page, console.url + "/#/")
    expect(page.locator("table.namespaces tr", has_text=DEMO_NS)).to_have_count(1)
    tab.clean()


def test_console_session_timeline_shows_turns_segments_and_records(
    console: Console, tab: Watched
) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/ns/{DEMO_NS}")
    page.locator("table.sessions a", has_text="s1").click()
    settle(page)
    expect(page.locator("h1")).to_have_text("Session s1")
    turns = page.locator("li.turn")
    expect(turns.first).to_contain_text("Riverside Half Marathon")
    expect(turns).to_have_count(14)
    segments = page.locator("aside.segment")
    assert segments.count() >= 2
    expect(segments.first.locator(".badge.reason")).to_have_text(re.compile(r"\w+_\w+"))
    expect(page.locator("table.signals").first).to_contain_text("P(cut)")
    record = page.locator("li.record").first
    expect(record).to_be_visible()
    source = record.locator("button.turnref").first
    source_id = source.inner_text()
    source.click()  # record -> the turn it came from
    expect(page.locator(f"li.turn.hl[data-turn='{source_id}']")).to_be_visible()
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, "console-timeline.png")

    visit(page, f"{console.url}/#/ns/{DEMO_NS}/s/s1?size=5")  # pages
    expect(page.locator(".pager").first).to_contain_text("page 1 of 3")
    page.locator(".pager").first.get_by_text("next ›").click()
    settle(page)
    expect(page.locator(".pager").first).to_contain_text("page 2 of 3")
    expect(page.locator("li.turn .seq")).to_have_text(["#5", "#6", "#7", "#8", "#9"])
    tab.clean()


def test_console_timeline_shows_a_tool_item_as_not_memory(console: Console, tab: Watched) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/ns/{TOOLS_NS}/s/r1")
    expect(page.locator("h1")).to_have_text("Session r1")
    turns = page.locator("li.turn")
    expect(turns).to_have_count(3)
    expect(turns.nth(1).locator(".badge")).to_have_text("not memory")
    expect(turns.nth(0).locator(".badge")).to_have_count(0)
    expect(page.get_by_text("No finalized segment")).to_have_count(0)  # it waits for none
    tab.clean()


def test_console_history_shows_what_replaced_what(console: Console, tab: Watched) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/ns/{CHANGES_NS}")
    page.get_by_role("link", name="history").click()
    settle(page)
    expect(page.locator("h1")).to_have_text(f"History of {CHANGES_NS}")
    (change,) = page.locator("ol.history li").all()
    expect(change.locator(".badge")).to_have_text(re.compile(r"^replaced 2024-04-02"))
    expect(change.locator(".finder")).to_have_text("rule:value-change")
    expect(change.locator(".said").first).to_contain_text("900 watts")
    expect(change.locator(".said").nth(1)).to_contain_text("650 watts")
    expect(page.locator("section", has_text="Open conflicts")).to_contain_text("No conflicts.")
    change.locator(".said").first.locator(".record a").click()  # -> the older record's own
    settle(page)
    expect(page.locator("h1")).to_have_text(re.compile(r"^History of record "))
    (own,) = page.locator("ol.history li").all()
    expect(own.locator(".said").first).to_contain_text("900 watts")
    expect(own.locator(".said").nth(1)).to_contain_text("650 watts")
    page.locator(".crumbs").get_by_role("link", name="history").click()  # back to all
    settle(page)
    expect(page.locator("h1")).to_have_text(f"History of {CHANGES_NS}")
    change = page.locator("ol.history li").first
    change.locator(".said").nth(1).locator(".turns a").first.click()  # -> its session
    settle(page)
    expect(page.locator("h1")).to_have_text("Session c2")
    # a search marks each item as its links say, as the context's notes do
    q = "How many watts does the greenhouse heater draw?"
    visit(page, f"{console.url}/#/search?ns={CHANGES_NS}&q={q.replace(' ', '+')}&k=5")
    marks = page.locator("table.evidence .marks")
    expect(marks.filter(has_text="current since 2024-04-02").first).to_be_visible()
    expect(marks.filter(has_text=re.compile(r"replaced 2024-04-02")).first).to_be_visible()
    tab.clean()


def test_console_search_shows_plan_evidence_context_and_timings(
    console: Console, tab: Watched
) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/search")
    form = page.locator("form.search")
    form.locator("select[name=ns]").select_option(DEMO_NS)
    form.locator("input[name=q]").fill("When is the half marathon and where does it start?")
    form.locator("input[name=k]").fill("6")
    form.get_by_role("button", name="Search").click()
    settle(page)
    expect(page.locator("dl.plan")).to_contain_text("question type")
    expect(page.locator("table.routes tbody tr").first).to_contain_text("half marathon")
    evidence = page.locator("table.evidence tbody tr")
    expect(evidence).to_have_count(6)
    expect(page.locator("table.evidence")).to_contain_text("Riverside Half Marathon")
    expect(page.locator("ul.scores").first).to_contain_text("final")
    expect(page.locator("h2", has_text="Context")).to_contain_text("tokens")
    expect(page.locator("pre.context")).to_contain_text("Episodic/Semantic Memories")
    expect(page.locator("table.timings")).to_contain_text("total")
    page.evaluate("window.scrollTo(0, 0)")
    shoot(page, "console-search.png")
    link = evidence.first.locator("a.turnref").first
    turn_id = link.inner_text()
    link.click()  # evidence -> its turn in the timeline
    settle(page)
    expect(page.locator("li.turn.hl")).to_have_attribute("data-turn", turn_id)
    tab.clean()


def test_console_hostile_exchanges_render_as_text(console: Console, tab: Watched) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/ns/{HOSTILE_NS}/s/h1")
    turns = page.locator("li.turn .content")
    expect(turns).to_have_count(3)
    expect(turns.nth(0)).to_have_text(HOSTILE[0])  # the markup itself, shown as text
    expect(turns.nth(1)).to_have_text(HOSTILE[1])
    expect(turns.nth(2)).to_have_text(HOSTILE[2])
    expect(page.locator("li.turn strong").first).to_have_text(SPEAKER)
    expect(page.locator("li.record").first).to_be_visible()
    visit(page, f"{console.url}/#/search?ns={HOSTILE_NS}&q=dinghy+sailing+log&k=5")
    expect(page.locator("table.evidence")).to_contain_text("<script>")
    for where in (f"#/ns/{HOSTILE_NS}/s/h1", f"#/search?ns={HOSTILE_NS}&q=dinghy+sailing+log"):
        visit(page, f"{console.url}/{where}")
        expect(page.locator("li.turn, table.evidence").first).to_be_visible()
        assert page.locator("main img, main script, main b, main iframe").count() == 0
        assert page.locator("a[href^='javascript'], [onerror], [onclick]").count() == 0
    assert page.evaluate("window.__pwned") is None
    # the policy itself: an inline script added to the page does not run
    ran = page.evaluate("""() => { const s = document.createElement('script');
        s.textContent = 'window.__inline = 1'; document.body.append(s); return window.__inline; }""")
    assert ran is None
    tab.clean()


def test_console_key_for_one_namespace_sees_no_other(console: Console, tab: Watched) -> None:
    page = tab.page
    visit(page, console.keyed_url + "/")
    form = page.locator("form.key")
    form.locator("input[name=key]").fill("lyk_not-a-key")
    form.get_by_role("button").click()
    settle(page)
    expect(page.locator("form.key")).to_contain_text("API key")  # asked again
    page.locator("form.key input[name=key]").fill(console.keys["alice"])
    page.locator("form.key").get_by_role("button").click()
    settle(page)
    expect(page.locator("table.namespaces tbody tr")).to_have_count(1)
    expect(page.locator("table.namespaces")).to_contain_text(ALICE_NS)
    expect(page.locator("#who")).to_contain_text("alice")
    visit(page, f"{console.keyed_url}/#/search")  # the key is kept in the tab, not asked again
    expect(page.locator("select[name=ns] option")).to_have_text([ALICE_NS])
    visit(page, f"{console.keyed_url}/#/operations")
    expect(page.locator("main")).to_contain_text("This key reads only some namespaces")
    expect(page.locator("table.usage tbody tr")).to_have_count(1)
    expect(page.locator("table.usage")).to_contain_text(ALICE_NS)
    assert page.locator("main", has_text=DEMO_NS).count() == 0
    for where in (f"#/ns/{DEMO_NS}", f"#/ns/{DEMO_NS}/s/s1", f"#/search?ns={DEMO_NS}&q=marathon"):
        visit(page, f"{console.keyed_url}/{where}")
        expect(page.locator("p.error")).to_contain_text("403")
        assert "Riverside" not in page.locator("main").inner_text()
    page.locator("#who button").click()  # forget the key
    settle(page)
    expect(page.locator("form.key")).to_be_visible()
    page.locator("form.key input[name=key]").fill(console.keys["all"])
    page.locator("form.key").get_by_role("button").click()
    settle(page)
    visit(page, console.keyed_url + "/")
    expect(page.locator("table.namespaces tbody tr")).to_have_count(5)
    tab.clean()


def test_console_operations_shows_workers_lag_dead_letters_and_tokens(
    console: Console, tab: Watched
) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/operations")
    expect(page.locator("main h2").first).to_contain_text("lychee up running")
    for stage in ("segmenter", "encoder", "indexer", "query", "gateway"):
        expect(page.locator("main table").first).to_contain_text(stage)
    expect(page.locator("table.lag")).to_contain_text("memory.exchanges")
    expect(page.locator("main")).to_contain_text("memory.records.dlq")
    expect(page.locator("table.usage tbody tr", has_text=DEMO_NS)).to_be_visible()
    tab.clean()


@pytest.fixture(scope="module")
def dead_letters(console: Console) -> str:
    """An unparseable exchange (`json`) and a good one dead-lettered (`processing`), once
    both are listed; the replay route's URL."""
    good = exchange(ALICE_NS, "a2", "My cello is back from the luthier.")
    with ThreadPoolExecutor(1) as aside:  # Playwright's loop runs in this thread
        aside.submit(asyncio.run, unparseable(console.bootstrap, DEMO_NS)).result()
        aside.submit(asyncio.run, failed_exchange(console.bootstrap, good)).result()

    def reasons() -> set[str]:
        r = httpx.get(
            f"{console.url}/v1/dead-letters", params={"topic": "memory.exchanges"}, timeout=60
        )
        assert r.status_code == 200, r.text
        return {row["error_type"] for row in r.json()["reasons"]}

    wait_until(
        reasons,
        what="dead letters of both reasons listed",
        until=lambda found: {"json", "processing"} <= found,
        timeout_s=120,
        interval_s=0.5,
    )
    return f"{console.url}/v1/dead-letters/replay"


REPLAY = {"topic": "memory.exchanges", "error_type": "processing"}
# a plain form from another origin, its text/plain body shaped as JSON (the classic trick)
FORM = """<form method="post" enctype="text/plain" action="{}">
<input name='{{"topic": "memory.exchanges", "error_type": "processing", "x": "' value='"}}'>
</form>"""


def test_console_replay_refuses_requests_another_origin_could_send(
    console: Console, dead_letters: str, tab: Watched
) -> None:
    """Without keys: JSON only, the Host a loopback name, the Origin the gateway's own."""
    body = orjson.dumps(REPLAY)
    for headers, status in (
        ({"Content-Type": "text/plain"}, 415),  # a form or a no-cors fetch: no preflight
        ({"Origin": "http://127.0.0.1:9"}, 403),  # another origin's script
        ({"Host": "rebound.example:80"}, 421),  # a name rebound to 127.0.0.1 (DNS rebinding)
    ):
        sent = {"Content-Type": "application/json", **headers}
        r = httpx.post(dead_letters, content=body, headers=sent, timeout=60)
        assert r.status_code == status, (headers, r.text)
    page = tab.page
    elsewhere = "http://127.0.0.1:9/page"  # another origin (port), served by the test
    page.route(
        elsewhere,
        lambda route: route.fulfill(content_type="text/html", body=FORM.format(dead_letters)),
    )
    page.goto(elsewhere)
    with page.expect_navigation(url=dead_letters) as answer:  # done loading, not just answered
        page.locator("form").evaluate("form => form.submit()")
    assert answer.value is not None and answer.value.status == 415
    page.goto(elsewhere)
    fetched = page.evaluate(
        """(url) => fetch(url, {method: 'POST', body: '{}',
        headers: {'Content-Type': 'application/json'}}).then((r) => r.status, () => 'blocked')""",
        dead_letters,
    )
    assert fetched == "blocked"  # its preflight is not granted
    dry = httpx.post(dead_letters, json={**REPLAY, "dry_run": True}, timeout=60).json()
    assert len(dry["replayed"]) == 1 and dry["already"] == []  # nothing was replayed
    tab.clean()


def test_console_dead_letters_by_reason_with_sample_then_replay_once(
    console: Console, dead_letters: str, tab: Watched
) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/operations")
    bad = page.locator("table.reasons tr.reason[data-reason='json']")
    expect(bad).to_contain_text("memory.exchanges.dlq")
    expect(bad).to_contain_text("segmenter")
    expect(bad.locator("pre.value")).to_have_text(UNPARSEABLE_TEXT)  # the markup, as text
    assert page.locator("main img, main script").count() == 0
    row = page.locator("table.reasons tr.reason[data-reason='processing']")
    panel = row.locator("xpath=following-sibling::tr[1]")
    row.get_by_role("button", name="Replay…").click()
    expect(panel).to_contain_text(
        "Dry run: 1 of 1 dead letters would be replayed to memory.exchanges"
    )
    panel.get_by_role("button", name="Replay 1").click()
    expect(panel.locator(".receipt")).to_contain_text("Replayed 1 of 1")
    expect(panel.locator(".receipt li")).to_contain_text("→ memory.exchanges")

    row.get_by_role("button", name="Replay…").click()  # a second replay of the same
    expect(panel.locator(".refusal")).to_contain_text("refused, as the CLI refuses it")
    expect(panel.locator(".receipt")).to_have_count(0)
    panel.get_by_role("button", name="Replay again anyway…").click()
    confirm = panel.get_by_role("button", name="Yes, replay them again")  # the second confirmation
    expect(confirm).to_be_visible()
    confirm.click()
    expect(panel.locator(".receipt")).to_contain_text("Replayed 1 of 1")
    assert page.evaluate("window.__pwned") is None
    tab.clean()


def test_console_forget_namespace_removes_it_from_every_page(
    console: Console, tab: Watched
) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/")
    page.locator("table.namespaces tr", has_text=HOSTILE_NS).get_by_text("forget").click()
    settle(page)
    button = page.locator("form.forget button")
    expect(button).to_be_disabled()
    page.locator("form.forget input[name=confirm]").fill(HOSTILE_NS[:-1])
    expect(button).to_be_disabled()
    page.locator("form.forget input[name=confirm]").fill(HOSTILE_NS)
    button.click()
    receipt = page.locator("div.receipt")
    expect(receipt).to_contain_text(f"namespace {HOSTILE_NS}", timeout=300_000)
    expect(receipt.locator("table.removed tr", has_text="turns")).to_contain_text("3")

    visit(page, f"{console.url}/#/")
    expect(page.locator("table.namespaces tbody tr")).to_have_count(4)
    for where in ("#/", "#/search", "#/operations", "#/forget"):
        visit(page, f"{console.url}/{where}")
        assert HOSTILE_NS not in page.locator("main").inner_text(), where
    visit(page, f"{console.url}/#/search?ns={HOSTILE_NS}&q=dinghy")
    assert page.locator("table.evidence tbody tr").count() == 0
    visit(page, f"{console.url}/#/ns/{HOSTILE_NS}")
    expect(page.locator("main")).to_contain_text("No sessions.")
    visit(page, f"{console.url}/#/ns/{HOSTILE_NS}/s/h1")
    expect(page.locator("main")).to_contain_text("0 turns")
    assert "dinghy" not in page.locator("main").inner_text()
    tab.clean()


def test_console_forget_session_keeps_the_others(console: Console, tab: Watched) -> None:
    page = tab.page
    visit(page, f"{console.url}/#/ns/{DEMO_NS}")
    page.locator("table.sessions tr", has_text="s2").get_by_text("forget").click()
    settle(page)
    expect(page.locator("form.forget")).to_contain_text("session s2 of namespace")
    page.locator("form.forget input[name=confirm]").fill("s2")
    page.locator("form.forget button").click()
    expect(page.locator("div.receipt")).to_contain_text("session s2", timeout=300_000)
    visit(page, f"{console.url}/#/ns/{DEMO_NS}")
    expect(page.locator("table.sessions tbody tr")).to_have_count(1)
    expect(page.locator("table.sessions")).to_contain_text("s1")
    tab.clean()
