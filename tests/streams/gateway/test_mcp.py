"""The MCP server through the SDK's own client: streamable HTTP at the gateway's /mcp (API keys)
and stdio (`lychee mcp`), against the real stack."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from streams.stack.embedded import Stack
from tests.streams.gateway.conftest import ROOT, Gateways
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TOOLS = {
    "add_memory",
    "end_conversation",
    "search_memory",
    "get_status",
    "list_memories",
    "memory_history",
    "delete_all_memories",
}


def http_client(gateways: Gateways, key: str | None, replica: int = 0) -> Client:
    headers = {"Authorization": f"Bearer {gateways.keys[key]}"} if key else {}
    transport = streamable_http_client(
        f"{gateways.urls[replica]}/mcp",
        http_client=httpx2.AsyncClient(headers=headers, timeout=120),
    )
    return Client(transport, read_timeout_seconds=120)


async def check_memory_tools(client: Client, namespace: str | None) -> None:
    """add, then search waiting for the receipt, then status: what an agent does."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description or "") > 150, tool.name  # enough to act on unprompted
        assert "namespace" in tool.input_schema["properties"]
    ns: dict[str, Any] = {"namespace": namespace} if namespace else {}
    added = await client.call_tool(
        "add_memory",
        {
            "content": "I keep my climbing shoes in the blue locker at the gym.",
            "speaker": "Rafa",
            "session_id": "mcp-s1",
            "exchange_id": "mcp-e1",
            **ns,
        },
    )
    assert not added.is_error, added.content
    receipt = added.structured_content
    assert receipt is not None and receipt["exchanges"][0]["seq"] == 0
    again = await client.call_tool(
        "add_memory",
        {
            "content": "I keep my climbing shoes in the blue locker at the gym.",
            "speaker": "Rafa",
            "session_id": "mcp-s1",
            "exchange_id": "mcp-e1",
            **ns,
        },
    )
    assert again.structured_content and again.structured_content["exchanges"][0]["duplicate"]
    # k = 10: the namespace is shared with the REST tests, whose records can outrank a raw turn
    found = await client.call_tool(
        "search_memory",
        {"query": "Where are the climbing shoes kept?", "k": 10, "wait_for": receipt, **ns},
    )
    assert not found.is_error, found.content
    memories = (found.structured_content or {})["memories"]
    assert any("blue locker" in m["text"] for m in memories)
    status = await client.call_tool("get_status", {"session_id": "mcp-s1", **ns})
    (session,) = (status.structured_content or {})["sessions"]
    assert session["last_seq_accepted"] == 0 and session["searchable"]
    bad = await client.call_tool("add_memory", {"session_id": "mcp-s1", **ns})
    assert bad.is_error and "content" in bad.content[0].text
    # the conversation's records now, not after the idle timeout
    ended = await client.call_tool("end_conversation", {"session_id": "mcp-s1", **ns})
    assert not ended.is_error, ended.content
    assert (ended.structured_content or {})["kind"] == "end_session"

    async def recorded() -> bool:
        listed = await client.call_tool("list_memories", {"session_id": "mcp-s1", **ns})
        items = (listed.structured_content or {}).get("items", [])
        return any("blue locker" in str(r.get("semantic_text", "")) for r in items)

    await eventually(recorded, timeout_s=120, interval_s=0.5, what="the conversation's records")


async def test_mcp_http_tools_with_the_keys_namespace(gateways: Gateways) -> None:
    # key "a" has exactly one namespace: the tools use it when a call names none
    async with http_client(gateways, "a") as client:
        await check_memory_tools(client, None)


async def test_mcp_http_key_for_a_is_refused_b_on_every_tool(gateways: Gateways) -> None:
    calls = {
        "add_memory": {"content": "secret", "session_id": "x"},
        "search_memory": {"query": "secret"},
        "get_status": {},
        "list_memories": {},
        "delete_all_memories": {"confirm": "gw-b"},
    }
    async with http_client(gateways, "a", replica=1) as client:
        for tool, args in calls.items():
            for ns in ("gw-b", "other"):
                out = await client.call_tool(tool, {**args, "namespace": ns})
                assert out.is_error, (tool, ns)
                assert f"may not use namespace '{ns}'" in out.content[0].text
    async with http_client(gateways, "all") as client:  # a pattern key names its namespace
        out = await client.call_tool("get_status", {})
        assert out.is_error and "name the namespace" in out.content[0].text
    async with http_client(gateways, "a") as client:  # an empty name is no call for the default
        out = await client.call_tool("search_memory", {"query": "secret", "namespace": ""})
        assert out.is_error and out.content[0].text.startswith(
            "search_memory: namespace: must be 1-128 characters"
        ), out.content[0].text
        assert out.content[0].text.endswith("(got '')")
    # no key, or a wrong one: the HTTP endpoint refuses before any tool runs
    for headers in ({}, {"Authorization": "Bearer lyk_wrong"}):
        r = httpx.post(
            f"{gateways.urls[0]}/mcp",
            headers=headers,
            timeout=30,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"


def stdio_server(stack: Stack, *args: str) -> StdioServerParameters:
    """`lychee mcp ARGS` for the session's stack, with no namespace from the environment."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "LYCHEE_MCP_NAMESPACE"},
        **stack.env(),
        "LYCHEE_LOG_LEVEL": "WARNING",
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "PYTHONPATH": str(ROOT),
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "streams.cli", "mcp", *args], env=env, cwd=str(ROOT)
    )


async def test_mcp_stdio_tools_through_the_sdk_client(stack: Stack) -> None:
    params = stdio_server(stack, "--namespace", "mcp-stdio")
    async with Client(params, read_timeout_seconds=180) as client:
        info = client.server_info
        assert (info.name, info.version) == ("lychee-memory", version("lychee-memory"))
        await check_memory_tools(client, None)
        named = await client.call_tool("get_status", {"namespace": "mcp-stdio"})
        assert not named.is_error, named.content


async def test_mcp_stdio_with_a_namespace_serves_it_only(stack: Stack) -> None:
    """An agent told by what it reads to name another namespace reaches nothing there."""
    calls = {
        "add_memory": {"content": "secret", "session_id": "x"},
        "end_conversation": {"session_id": "x"},
        "search_memory": {"query": "secret"},
        "get_status": {},
        "list_memories": {},
        "memory_history": {},
        "delete_all_memories": {"confirm": "mcp-other"},
    }
    async with Client(
        stdio_server(stack, "--namespace", "mcp-only"), read_timeout_seconds=180
    ) as c:
        for tool, args in calls.items():
            out = await c.call_tool(tool, {**args, "namespace": "mcp-other"})
            assert out.is_error, tool
            text = out.content[0].text
            assert "this MCP server serves namespace 'mcp-only' only" in text, (tool, text)


async def test_mcp_stdio_without_a_namespace_takes_the_tool_argument(stack: Stack) -> None:
    async with Client(stdio_server(stack), read_timeout_seconds=180) as client:
        added = await client.call_tool(
            "add_memory",
            {"content": "I like tea.", "session_id": "s1", "namespace": "mcp-stdio-any"},
        )
        assert not added.is_error, added.content
        status = await client.call_tool("get_status", {"namespace": "mcp-stdio-any"})
        assert (status.structured_content or {})["namespace"] == "mcp-stdio-any"
        unnamed = await client.call_tool("get_status", {})
        assert unnamed.is_error and "name the namespace" in unnamed.content[0].text
