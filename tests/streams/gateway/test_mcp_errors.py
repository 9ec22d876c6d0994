"""An MCP tool's error reaches the host as one line, whichever part of ours raised it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from schemas import QueryReply
from streams.errors import StoreMissing
from streams.gateway.auth import Principal
from streams.gateway.errors import Unavailable
from streams.gateway.mcp import _call, build_mcp


async def _service() -> Any:
    return object()


async def test_a_store_the_service_cannot_find_is_named_in_one_line() -> None:
    async def use(_: Any) -> None:
        raise StoreMissing("no memory store at ./data/lancedb")

    with pytest.raises(ToolError) as raised:
        await _call(_service, use)
    assert str(raised.value) == "no memory store at ./data/lancedb"


async def test_a_gateway_error_keeps_its_title_and_detail() -> None:
    async def use(_: Any) -> None:
        raise Unavailable("Kafka at 127.0.0.1:1 (no broker answers)")

    with pytest.raises(ToolError) as raised:
        await _call(_service, use)
    assert str(raised.value) == f"{Unavailable.title}: Kafka at 127.0.0.1:1 (no broker answers)"


async def test_an_unexpected_error_is_named_as_the_rest_routes_name_it() -> None:
    """Not the SDK's bare "Error executing tool": the kind of error, as a 500's detail."""

    async def use(_: Any) -> None:
        raise OverflowError("date value out of range")

    with pytest.raises(ToolError) as raised:
        await _call(_service, use)
    assert str(raised.value) == "Internal error: OverflowError"


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("search_memory", {"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
        ("memory_history", {"record_id": "r" * 300}, "record_id: String should have at most 200"),
        # the exchange's turns by the tool's arguments they came from, in our words
        ("add_memory", {"messages": [{"role": "user", "content": "hi"}] * 65}, "messages: List"),
        ("add_memory", {"content": " "}, "content: a turn needs content or an image caption"),
        ("search_memory", {"query": "x", "namespace": "../x"}, "namespace: must be 1-128"),
    ],
)
async def test_arguments_the_schema_refuses_are_named_field_by_field(
    tool: str, arguments: dict[str, Any], named: str
) -> None:
    """As the REST routes name them: the tool and the field, not the validation library's
    report with its links."""
    server = build_mcp(_service, lambda ctx: None, default_namespace="me")  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolError) as raised:
        await server.call_tool(tool, arguments)
    text = str(raised.value)
    assert text.startswith(f"{tool}: {named}"), text
    assert "pydantic" not in text and "\n" not in text


async def test_an_argument_the_tool_does_not_take_is_named_with_those_it_takes() -> None:
    """A misspelled argument is refused, as a REST route refuses a field it does not know,
    instead of the call running with the argument's default."""
    server = build_mcp(_service, lambda ctx: None, default_namespace="me")  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolError) as raised:
        await server.call_tool("search_memory", {"query": "x", "top_k": 5})
    assert str(raised.value) == (
        "search_memory: top_k: not an argument of this tool "
        "(it takes query, k, session_id, token_budget, wait_for, namespace)"
    )


async def test_a_field_a_message_does_not_take_is_named() -> None:
    server = build_mcp(_service, lambda ctx: None, default_namespace="me")  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolError) as raised:
        await server.call_tool("add_memory", {"messages": [{"role": "user", "text": "hi"}]})
    assert str(raised.value).startswith(
        "add_memory: messages.0.content: Field required; messages.0.text: Extra inputs"
    ), raised.value


async def test_search_memory_hands_its_token_budget_to_the_search() -> None:
    """The budget reaches the service's search as the REST route's `token_budget` (what the
    service does with it: tests/workers/query/test_token_budget.py)."""
    asked: list[Any] = []

    class Service:
        async def search(self, namespace: str, req: Any) -> QueryReply:
            asked.append(req)
            return QueryReply(correlation_id="c", namespace=namespace, status="ok")

    async def service() -> Any:
        return Service()

    server = build_mcp(service, lambda ctx: Principal.local(), default_namespace="me")
    await server.call_tool("search_memory", {"query": "x", "token_budget": 300})
    assert [r.token_budget for r in asked] == [300]
    with pytest.raises(ToolError, match="token_budget"):
        await server.call_tool("search_memory", {"query": "x", "token_budget": 10})
