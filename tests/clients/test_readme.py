"""Every snippet of the README's "From your agent framework" section runs, as written and on its
own, against the test stack (its gateway in place of port 8080, the fake OpenAI server as the
SDK's)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import set_default_openai_api, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

from lychee_client import LycheeClient
from tests.clients.conftest import Gateway
from tests.fakes.openai_server import FakeOpenAI, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- README test: framework -->"
SNIPPET = re.compile(re.escape(MARKER) + r"\n```python\n(.*?)```", re.DOTALL)


def snippets() -> list[str]:
    return SNIPPET.findall(README.read_text())


@pytest.fixture
def sdk_on_fake() -> Iterator[FakeOpenAI]:
    """The Agents SDK's default client pointed at the fake, on the chat completions API."""
    set_tracing_disabled(True)
    with FakeOpenAI(default_reply=text("You live in Porto.")) as server:
        set_default_openai_client(
            AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0), use_for_tracing=False
        )
        set_default_openai_api("chat_completions")
        try:
            yield server
        finally:
            set_default_openai_api("responses")


def test_readme_framework_snippets_run_against_the_stack(
    gateway: Gateway,
    sdk_on_fake: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocks = snippets()
    assert len(blocks) == 3 and all(MARKER not in b for b in blocks)
    monkeypatch.setenv("LYCHEE_API_KEY", gateway.root_key)
    with LycheeClient(gateway.url, "u42", api_key=gateway.root_key) as admin:
        admin.search("warm up", timeout_s=120)  # the snippets keep the gateway's 15 s budget
        for block in blocks:  # each on its own, as a user copies one
            scope: dict[str, object] = {"__name__": "readme"}
            exec(block.replace("http://127.0.0.1:8080", gateway.url), scope)  # noqa: S102
        printed = capsys.readouterr().out.splitlines()
        assert "Porto" in printed[0]
        assert printed[1] == "{'text': 'Ann lives in Porto'}"
        assert printed[2] == "You live in Porto."
        chat2 = [(t["role"], t["content"]) for t in admin.all_turns("chat-2")]
        assert chat2 == [("user", "Where do I live?"), ("assistant", "You live in Porto.")]
        assert sdk_on_fake.requests[0]["messages"][-1]["content"] == "Where do I live?"
        admin.forget_namespace()
