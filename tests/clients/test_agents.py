"""The OpenAI Agents SDK over the service, with the real `openai-agents`: an `Agent` run
against the fake OpenAI-compatible server keeps its history in the service's raw turns, and a
later run in another session recalls it through the `search_memory` tool."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from lychee_client import AsyncLycheeClient, GatewayTimedOut
from lychee_client.agents import (
    EXCHANGE_BYTES,
    LycheeSession,
    from_turn,
    search_memory_tool,
    to_turn,
)
from lychee_client.client import headers
from schemas.base import TURN_CHARS
from schemas.gateway import ExchangeIn
from tests.clients.conftest import Gateway
from tests.fakes.openai_server import Action, FakeOpenAI, text, tool_call
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SEARCH_S = 120


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    set_tracing_disabled(True)  # the SDK would export its traces to OpenAI

    def respond(body: dict[str, Any]) -> Action | None:
        """After a tool call, answer with what the tool returned."""
        last = body["messages"][-1]
        return text(f"From memory: {last['content']}") if last["role"] == "tool" else None

    with FakeOpenAI(default_reply=text("Noted."), respond=respond) as server:
        yield server


def agent_on(server: FakeOpenAI, client: AsyncLycheeClient) -> Agent:
    model = OpenAIChatCompletionsModel(
        model="fake", openai_client=AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
    )
    tool = search_memory_tool(client, timeout_s=SEARCH_S)
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[tool])


async def test_agent_session_keeps_turns_in_the_service_and_a_later_run_recalls_them(
    gateway: Gateway, llm: FakeOpenAI
) -> None:
    ns = f"cl-ag-{uuid.uuid4().hex[:8]}"
    async with AsyncLycheeClient(gateway.url, ns, api_key=gateway.key) as client:
        agent = agent_on(llm, client)
        monday = LycheeSession("monday", client)
        first = await Runner.run(agent, "My bicycle is a green Brompton.", session=monday)
        assert first.final_output == "Noted."
        stored = await client.all_turns("monday")
        assert [(t["role"], t["content"]) for t in stored] == [
            ("user", "My bicycle is a green Brompton."),
            ("assistant", "Noted."),
        ]

        await Runner.run(agent, "And I ride it to work.", session=monday)
        sent = llm.requests[-1]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == [
            "My bicycle is a green Brompton.",
            "And I ride it to work.",
        ]  # the session's history, read back from the service

        llm.script(tool_call("search_memory", query="bicycle"))
        later = await Runner.run(
            agent, "What bicycle do I have?", session=LycheeSession("friday", client)
        )
        assert "green Brompton" in later.final_output  # recalled through the tool
        friday = await LycheeSession("friday", client).get_items()
        assert [i.get("type") for i in friday][1:3] == ["function_call", "function_call_output"]
        assert friday[0] == {"role": "user", "content": "What bicycle do I have?"}


async def test_a_sessions_tool_items_are_kept_and_replayed_but_never_found(
    gateway: Gateway,
) -> None:
    """A tool's output (here a memory search's, which repeats what it found) is history the
    session replays, not memory: no search finds it, no record is made of it, and the
    messages around it are found as before."""
    ns = f"cl-ag-{uuid.uuid4().hex[:8]}"
    call = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    output = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "The kayak club meets at the harbour pier every Thursday.",
    }
    async with AsyncLycheeClient(gateway.url, ns, api_key=gateway.key) as client:
        session = LycheeSession("s", client)
        await session.add_items(
            [{"role": "user", "content": "Where does my kayak club meet?"}, call, output]
        )
        said = "I joined a kayak club last spring."
        await session.add_items([{"role": "user", "content": said}])
        assert await session.get_items() == [
            {"role": "user", "content": "Where does my kayak club meet?"},
            call,
            output,
            {"role": "user", "content": said},
        ]
        listed = await client.all_turns("s")
        assert [t.get("memory") for t in listed] == [True, False, False, True]

        found = await client.search("kayak club harbour pier Thursday", k=20)
        shown = [e.text for e in found.evidence]
        assert any("Where does my kayak club meet?" in t for t in shown)
        assert not any("harbour pier" in t or "function_call" in t for t in shown)
        ended = await session.end()  # the segment is encoded: its records are written
        assert (ended.session_id, ended.kind) == ("s", "end_session")
        records = await eventually(
            lambda: client.records(page_size=200),
            what="the session's records",
            until=lambda page: any("kayak" in r["semantic_text"] for r in page.items),
            timeout_s=120,
            interval_s=0.5,
        )
        assert not any("harbour" in r["semantic_text"] for r in records.items)

        # a pop keeps what the kept turns are: the items stay out of memory
        assert await session.pop_item() == {"role": "user", "content": said}
        assert [t.get("memory") for t in await client.all_turns("s")] == [True, False, False]


async def test_session_pop_item_and_clear_session_remove_from_the_service(
    gateway: Gateway,
) -> None:
    ns = f"cl-ag-{uuid.uuid4().hex[:8]}"
    async with AsyncLycheeClient(gateway.url, ns, api_key=gateway.key) as client:
        session = LycheeSession("s", client)
        await session.add_items(
            [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
        )
        await session.add_items(
            [{"role": "user", "content": [{"type": "input_text", "text": "three"}]}]
        )
        assert await session.get_items(limit=2) == [
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ]
        assert await session.pop_item() == {"role": "user", "content": "three"}
        assert [t["content"] for t in await client.all_turns("s")] == ["one", "two"]
        await session.clear_session()
        assert await session.get_items() == [] and await client.all_turns("s") == []
        assert await session.pop_item() is None


def test_session_items_go_in_exchanges_the_service_accepts() -> None:
    """Large tool outputs: one exchange of all of them would be over the stages' message limit
    (refused with 413)."""
    outputs = [
        {"type": "function_call_output", "call_id": f"c{i}", "output": "é" * 95_000}
        for i in range(6)
    ]
    session = LycheeSession("s", AsyncLycheeClient("http://127.0.0.1:9", "ns"))
    exchanges = session._exchanges([to_turn(o) for o in outputs])
    sizes = [sum(len(t.content.encode()) for t in e.turns) for e in exchanges]
    assert [len(e.turns) for e in exchanges] == [2, 2, 2]
    assert max(sizes) <= EXCHANGE_BYTES
    assert [from_turn(t.model_dump()) for e in exchanges for t in e.turns] == outputs
    many = session._exchanges([{"role": "user", "content": f"m{i}"} for i in range(130)])
    assert [len(e.turns) for e in many] == [64, 64, 2]


def test_an_item_longer_than_a_turn_keeps_its_start_and_stays_an_item() -> None:
    """A runaway tool output must not end the run: its longest text is cut, with a note."""
    output = {"type": "function_call_output", "call_id": "c1", "output": "é\n" * 130_000}
    turn = to_turn(output)
    back = from_turn(turn)
    assert len(turn["content"]) <= TURN_CHARS and output["output"] == "é\n" * 130_000
    assert back["call_id"] == "c1" and back["output"].startswith("é\n" * 1000)  # type: ignore[typeddict-item]
    assert back["output"].endswith("characters left out: a turn holds 200000]")  # type: ignore[typeddict-item]
    said = to_turn({"role": "user", "content": "z" * 250_000})
    assert len(said["content"]) <= TURN_CHARS and said["content"].startswith("z" * 1000)
    scattered = to_turn({"type": "x", "parts": ["ab"] * 70_000})  # no one string holds enough
    assert len(scattered["content"]) <= TURN_CHARS
    session = LycheeSession("s", AsyncLycheeClient("http://127.0.0.1:9", "ns"))
    assert sum(len(e.turns) for e in session._exchanges([turn, said, scattered])) == 3
    with pytest.raises(ValueError, match="session_id: must be 1-128"):
        LycheeSession("bad id/..", AsyncLycheeClient("http://127.0.0.1:9", "ns"))


@pytest.mark.parametrize("content", ["not json {", "[1, 2, 3]", '"a string"'])
def test_a_foreign_turn_said_as_an_item_comes_back_as_its_message(content: str) -> None:
    turn = {"role": "assistant", "speaker": "agents-item", "content": content}
    assert from_turn(turn) == {"role": "assistant", "content": content}


@pytest.mark.parametrize("k", [0, 201])
def test_a_memory_tool_with_a_k_the_service_refuses_is_not_built(k: int) -> None:
    client = AsyncLycheeClient("http://127.0.0.1:9", "ns")
    with pytest.raises(ValueError, match="k"):
        search_memory_tool(client, k=k)


def test_a_memory_tool_with_a_budget_the_service_refuses_is_not_built() -> None:
    client = AsyncLycheeClient("http://127.0.0.1:9", "ns")
    with pytest.raises(ValueError, match="token_budget"):
        search_memory_tool(client, token_budget=10)


class TimesOutAfterForget(httpx.AsyncHTTPTransport):
    """The gateway as a slow one looks at the HTTP boundary: once armed, the first add after
    a forget (the pop's add back) is sent and gets no answer in time."""

    armed = False
    forgot = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        adding = request.method == "POST" and request.url.path.endswith("/exchanges")
        if self.armed and self.forgot and adding:
            self.armed = False
            raise httpx.ReadTimeout("no answer in time", request=request)
        response = await super().handle_async_request(request)
        self.forgot = request.method == "DELETE"
        return response


async def test_a_pop_that_fails_after_the_forget_loses_no_more_than_its_item(
    gateway: Gateway,
) -> None:
    ns = f"cl-ag-{uuid.uuid4().hex[:8]}"
    transport = TimesOutAfterForget()
    http = httpx.AsyncClient(
        base_url=gateway.url, transport=transport, headers=headers(gateway.key)
    )
    async with AsyncLycheeClient(gateway.url, ns, http=http) as client, http:
        session = LycheeSession("s", client)
        items = [{"role": "user", "content": f"fact {i}"} for i in range(10)]
        await session.add_items(items)  # type: ignore[arg-type]
        transport.armed = True
        with pytest.raises(GatewayTimedOut):
            await session.pop_item()
        assert await session.get_items() == items[:9]  # the copy, added back
        assert await client.all_turns(session.backup_id) == []
        assert await session.pop_item() == items[8]
        assert await session.get_items() == items[:8]


async def test_a_pop_keeps_the_other_turns_as_they_were_stored(gateway: Gateway) -> None:
    """Speakers, dates, turn ids and image captions another client wrote survive a pop; a
    caption-only turn reads as its caption, not as an empty message."""
    ns = f"cl-ag-{uuid.uuid4().hex[:8]}"
    async with AsyncLycheeClient(gateway.url, ns, api_key=gateway.key) as client:
        ann = {"role": "user", "speaker": "Ann"}
        receipt = await client.add(
            [
                {
                    "session_id": "chat",
                    "session_date": "2023-05-07T10:00:00Z",
                    "turns": [
                        {
                            **ann,
                            "content": "I moved to Porto in May.",
                            "turn_id": "D1:1",
                            "created_at": "2023-05-07T10:00:00Z",
                        },
                        {
                            "role": "assistant",
                            "speaker": "Bot",
                            "content": "Nice!",
                            "turn_id": "D1:2",
                            "created_at": "2023-05-07T10:00:05Z",
                        },
                    ],
                },
                {
                    "session_id": "chat",
                    "session_date": "2023-06-01T09:00:00Z",
                    "turns": [
                        {
                            **ann,
                            "content": "",
                            "image_caption": "a photo of my new flat",
                            "turn_id": "D2:1",
                        },
                        {**ann, "content": "oops typo", "turn_id": "D2:2"},
                    ],
                },
            ]
        )
        await client.wait_indexed(receipt)
        session = LycheeSession("chat", client)
        assert (await session.get_items())[2] == {
            "role": "user",
            "content": "[image: a photo of my new flat]",
        }
        keys = ("role", "speaker", "content", "image_caption", "turn_id", "session_date")
        before = [
            {k: t.get(k) for k in (*keys, "created_at", "seq")}
            for t in await client.all_turns("chat")
        ]
        assert await session.pop_item() == {"role": "user", "content": "oops typo"}
        after = await client.all_turns("chat")
        assert [{k: t.get(k) for k in (*keys, "created_at")} for t in after] == [
            {k: t[k] for k in (*keys, "created_at")} for t in before[:3]
        ]
        assert len({t["seq"] for t in after}) == 2  # the same two exchanges


def test_an_image_over_a_turn_gives_way_to_a_note_and_binary_data_is_never_cut() -> None:
    """A cut data URL would be an invalid image, replayed to the model on every later run."""
    photo = "data:image/jpeg;base64," + base64.b64encode(bytes(range(256)) * 860).decode()
    asked = {"type": "input_text", "text": "What is in this photo?"}
    message = {"role": "user", "content": [asked, {"type": "input_image", "image_url": photo}]}
    turn = to_turn(message)
    assert len(turn["content"]) <= TURN_CHARS
    back = from_turn(turn)
    assert back["content"][0] == asked  # type: ignore[index]
    note = back["content"][1]  # type: ignore[index]
    assert note["type"] == "input_text"
    assert note["text"].startswith("[an image (image/jpeg) of about 220160 bytes was here")
    secret = base64.b64encode(bytes(range(256)) * 800).decode()
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": secret}
    with pytest.raises(ValueError, match="the reasoning item 'rs_1' is more than the 200000"):
        to_turn(reasoning)


def test_a_message_with_nothing_visible_is_kept_as_an_item() -> None:
    """The service's rule for an empty turn, not str.strip: a zero-width space is kept as
    JSON, as an empty message is, instead of failing the whole add."""
    for content in ("\u200b", "\x00", ""):
        item = {"role": "user", "content": content}
        turn = to_turn(item)
        ExchangeIn.model_validate({"session_id": "s", "turns": [turn]})  # the gateway's check
        assert turn["speaker"] == "agents-item" and from_turn(turn) == item
