"""Structured outputs (`workers.llm.formats`): strict schemas from the reply models, and the
ladder json_schema -> json_object -> prompt only, remembered per endpoint, against fakes
that refuse a format with a 400 as real servers do."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from structlog.testing import capture_logs

from tests.fakes.openai_server import FakeOpenAI, status, text, valid
from tests.workers.conftest import Sleeps
from tests.workers.encoder.test_llm_encoder import make_segment, record, reply
from workers.encoder.llm_encoder import LLMEncoder
from workers.encoder.prompts import reply_schema_for
from workers.llm.calls import complete, make_client
from workers.llm.errors import CompletionError
from workers.llm.formats import Format, FormatSupport, format_refused, reply_schema
from workers.llm.policy import RetryPolicy
from workers.query.planner.prompts import PLAN_SCHEMA, _Reply

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


async def ask(client: openai.AsyncOpenAI, formats: FormatSupport, *, json_mode: bool = True) -> str:
    out = await complete(
        client,
        "m",
        [{"role": "user", "content": "hi"}],
        json_mode=json_mode,
        policy=RetryPolicy(max_attempts=2),
        sleep=Sleeps(),
        rng=random.Random(0),
        schema=SCHEMA,
        schema_name="thing",
        formats=formats,
    )
    return out.text


def kinds(server: FakeOpenAI) -> list[str | None]:
    return [(b.get("response_format") or {}).get("type") for b in server.requests]


@pytest.mark.parametrize("schema", [PLAN_SCHEMA, reply_schema_for(3)])
def test_reply_schema_is_strict_inlined_and_free_of_length_limits(schema: dict[str, Any]) -> None:
    for node in walk(schema):
        assert "$ref" not in node and "$defs" not in node and "title" not in node
        assert not {"maxLength", "minLength", "default", "description"} & set(node)
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])


def test_reply_schema_keeps_the_fields_the_prompt_asks_for_by_their_json_names() -> None:
    assert list(PLAN_SCHEMA["properties"])[:2] == ["reason", "question_type"]
    assert "evidence_routes" in PLAN_SCHEMA["properties"]
    route = PLAN_SCHEMA["properties"]["evidence_routes"]["items"]
    assert "evidence_goal" in route["properties"]
    bounds = {"maxItems"}  # the plan's lists are bounded on top of the model's schema

    def unbounded(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: unbounded(v) for k, v in node.items() if k not in bounds}
        return [unbounded(x) for x in node] if isinstance(node, list) else node

    assert reply_schema(_Reply) == unbounded(PLAN_SCHEMA)
    turns = reply_schema_for(3)["properties"]["records"]["items"]["properties"]["evidence_turns"]
    assert turns["items"] == {"type": "integer", "minimum": 0, "maximum": 2}


def test_encoder_and_plan_reply_schemas_bound_every_list() -> None:
    records = reply_schema_for(2)["properties"]["records"]
    fields = records["items"]["properties"]
    assert records["maxItems"] == 6
    assert fields["evidence_turns"]["maxItems"] == 2
    assert fields["entities"]["maxItems"] == fields["tags"]["maxItems"] == 8
    for schema in (reply_schema_for(2), PLAN_SCHEMA):
        arrays = [n for n in walk(schema) if n.get("type") == "array"]
        assert arrays and all("maxItems" in n for n in arrays)


async def test_format_ladder_steps_down_once_per_refusal_and_remembers_the_endpoint(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.refuse_formats = {"json_schema"}
    server.script(valid({"a": "1"}), valid({"a": "2"}))
    formats = FormatSupport()

    with capture_logs() as logs:
        assert await ask(client, formats) == '{"a": "1"}'
        assert await ask(client, formats) == '{"a": "2"}'

    assert kinds(server) == ["json_schema", "json_object", "json_object"]
    (line,) = [e for e in logs if e["event"] == "llm.response_format_unsupported"]
    assert (line["refused"], line["now"]) == ("json_schema", "json_object")
    assert formats.start((str(client.base_url), "m"), Format.json_schema) is Format.json_object


async def test_format_ladder_ends_at_the_prompt_alone_when_both_formats_are_refused(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.refuse_formats = {"json_schema", "json_object"}
    server.script(text('{"a": "x"}'), text('{"a": "y"}'))
    formats = FormatSupport()

    with capture_logs() as logs:
        assert await ask(client, formats) == '{"a": "x"}'
        assert await ask(client, formats) == '{"a": "y"}'

    assert kinds(server) == ["json_schema", "json_object", None, None]
    assert len([e for e in logs if e["event"] == "llm.response_format_unsupported"]) == 2


async def test_format_memory_is_per_endpoint(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.refuse_formats = {"json_schema"}
    formats = FormatSupport()
    await ask(client, formats)
    with FakeOpenAI() as other:
        c2 = make_client(other.url, None, timeout_s=5.0)
        try:
            await ask(c2, formats)
        finally:
            await c2.close()
        assert kinds(other) == ["json_schema"]  # another endpoint starts at the top again


async def test_format_other_400_is_a_refusal_and_not_a_step_down(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    body = {"error": {"message": "the prompt exceeds the context size (8192 tokens)"}}
    server.script(status(400, {}, body))
    formats = FormatSupport()

    with pytest.raises(CompletionError) as info:
        await ask(client, formats)

    assert not info.value.retryable_exhausted and len(server.requests) == 1
    assert formats.start((str(client.base_url), "m"), Format.json_schema) is Format.json_schema
    assert not format_refused(info.value.error)


async def test_format_free_text_call_sends_no_response_format(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    await ask(client, FormatSupport(), json_mode=False)
    assert kinds(server) == [None]


async def test_encoder_on_a_server_without_json_schema_still_encodes_and_repairs(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.refuse_formats = {"json_schema"}
    server.script(text("not json at all"), valid(reply(record())))
    enc = LLMEncoder(client, "m", sleep=Sleeps(), formats=FormatSupport())

    out = await enc.encode(make_segment(), "")

    assert len(out.records) == 1 and out.usage.calls == 2  # the reply, then its repair
    assert kinds(server) == ["json_schema", "json_object", "json_object"]


@pytest.mark.parametrize("option", ["stream_options", "max_completion_tokens"])
async def test_endpoint_refusing_an_optional_parameter_is_asked_again_without_it_and_remembered(
    server: FakeOpenAI, client: openai.AsyncOpenAI, option: str
) -> None:
    server.refuse_options = {option}
    server.script(valid({"a": "1"}), valid({"a": "2"}))
    formats = FormatSupport()

    async def once() -> Any:
        return await complete(
            client,
            "m",
            [{"role": "user", "content": "hi"}],
            json_mode=False,
            policy=RetryPolicy(max_attempts=1),
            sleep=Sleeps(),
            rng=random.Random(0),
            formats=formats,
            max_tokens=100,
        )

    with capture_logs() as logs:
        await once()
        out = await once()

    assert [option in b for b in server.requests] == [True, False, False]
    other = "max_completion_tokens" if option == "stream_options" else "stream_options"
    assert all(other in b for b in server.requests)  # only the refused one is left out
    if option == "stream_options":
        assert out.prompt_tokens is None  # no usage chunk without it: estimated later
    events = [e for e in logs if e["event"] == "llm.option_unsupported"]
    assert [e["option"] for e in events] == [option]
