"""The fake OpenAI server's streaming and refusals, read off the wire as a client sees them."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.fakes.openai_server import FakeOpenAI, pieces, streamed, text, tool_call


def chat(server: FakeOpenAI, **body: Any) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": "one two three"}], **body}
    return httpx.post(f"{server.url}/chat/completions", json=payload, timeout=10)


def events(resp: httpx.Response) -> list[Any]:
    out = []
    for line in resp.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_fake_streams_word_chunks_then_the_finish_then_usage_when_asked() -> None:
    with FakeOpenAI() as server:
        server.script(text("Lisbon in March"), text("Lisbon in March"))
        with_usage = events(chat(server, stream=True, stream_options={"include_usage": True}))
        without = events(chat(server, stream=True))
    *chunks, finish, usage, done = with_usage
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == pieces("Lisbon in March")
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 3
    assert done == "[DONE]"
    assert without[-1] == "[DONE]" and all(e == "[DONE]" or e["choices"] for e in without)


def test_fake_cut_stream_ends_without_a_finish_reason() -> None:
    with FakeOpenAI() as server:
        server.script(streamed("a b c d", cut_after=2))
        got = events(chat(server, stream=True))
    assert [e["choices"][0]["finish_reason"] for e in got] == [None, None]
    assert server.generations[0].chunks == 2 and server.usages == []


def test_fake_streamed_action_answers_a_plain_request_at_once() -> None:
    with FakeOpenAI() as server:
        server.script(streamed({"a": 1}, gap_s=5.0))
        body = chat(server).json()
    assert body["choices"][0]["message"]["content"] == '{"a": 1}'


def test_fake_refuses_a_response_format_it_is_told_to_with_a_400_naming_it() -> None:
    with FakeOpenAI() as server:
        server.refuse_formats = {"json_schema"}
        server.script(text("kept for the next request"))
        refused = chat(server, response_format={"type": "json_schema", "json_schema": {}})
        ok = chat(server, response_format={"type": "json_object"})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "response_format"
    assert "'json_schema' is not supported" in refused.json()["error"]["message"]
    assert ok.json()["choices"][0]["message"]["content"] == "kept for the next request"


def test_fake_tool_call_answers_with_a_function_call_as_a_model_asking_for_a_tool() -> None:
    with FakeOpenAI() as server:
        server.script(tool_call("search_memory", query="bike"))
        choice = chat(server).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "search_memory"
    assert json.loads(call["function"]["arguments"]) == {"query": "bike"}
