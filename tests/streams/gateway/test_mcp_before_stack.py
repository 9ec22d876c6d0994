"""An MCP host configured before the stack runs (issue 24): `lychee mcp` and the gateway's
`/mcp` start, list their tools and answer every call with one line naming what is
unreachable; the first call after the stack is up succeeds, with no restart. Through the
official MCP Inspector CLI (as the operator who found it) and the Python SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from streams.stack.embedded import Child, free_port
from tests.hosts.inspector import Inspector
from tests.streams.gateway.conftest import ROOT, LateStack, wait_ready
from tests.streams.gateway.test_mcp import TOOLS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CALLS = {
    "add_memory": {"content": "I moved to Porto in May.", "session_id": "s1"},
    "search_memory": {"query": "Where do I live?"},
    "get_status": {},
    "end_conversation": {"session_id": "s1"},
    "list_memories": {},
    "delete_all_memories": {"confirm": "probe"},
}
ADD = {"content": "I moved to Porto in May.", "session_id": "s1", "exchange_id": "e1"}


def assert_names_the_stack(text: str, late: LateStack) -> None:
    s = late.stack
    assert f"Kafka at 127.0.0.1:{s.kafka_port} (no broker answers)" in text, text
    assert f"Redis at redis://127.0.0.1:{s.redis_port}/0 (connection refused)" in text, text
    assert "\n" not in text and "Traceback" not in text


def server_env(late: LateStack) -> dict[str, str]:
    return {**late.env(), "LYCHEE_LOG_LEVEL": "WARNING"}


MCP = [sys.executable, "-m", "streams.cli", "mcp", "--namespace", "probe"]


async def test_mcp_stdio_sdk_before_the_stack_names_it_then_works_without_restart(
    late_stack: LateStack,
) -> None:
    params = StdioServerParameters(
        command=MCP[0], args=MCP[1:], env={**os.environ, **server_env(late_stack)}, cwd=str(ROOT)
    )
    async with Client(params, read_timeout_seconds=180) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        for tool, args in CALLS.items():
            out = await client.call_tool(tool, args)
            assert out.is_error, tool
            assert_names_the_stack(out.content[0].text, late_stack)
        await asyncio.to_thread(late_stack.start)
        added = await client.call_tool("add_memory", ADD)  # the same server process
        assert not added.is_error, added.content
        assert (added.structured_content or {})["exchanges"][0]["seq"] == 0
        status = await client.call_tool("get_status", {"session_id": "s1"})
        assert (status.structured_content or {})["sessions"][0]["last_seq_accepted"] == 0


def test_mcp_stdio_inspector_before_the_stack_lists_tools_and_names_what_is_down(
    inspector: Inspector, late_stack: LateStack
) -> None:
    env = [arg for k, v in server_env(late_stack).items() for arg in ("-e", f"{k}={v}")]
    server = [*env, "--cwd", str(ROOT), "--", *MCP]
    listed = inspector.run("--method", "tools/list", *server)
    assert listed.code == 0, listed.stderr[-3000:]
    assert {t["name"] for t in listed.result["tools"]} == TOOLS
    called = inspector.run("--method", "tools/call", "--tool-name", "get_status", *server)
    assert called.result["isError"] is True, called.result
    assert_names_the_stack(called.result["content"][0]["text"], late_stack)


def test_gateway_before_the_stack_answers_503_then_serves_without_restart(
    inspector: Inspector, late_stack: LateStack
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "LYCHEE_API_KEYS_FILE"}
    gateway = Child(
        "gateway",
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
        late_stack.stack.data_dir.parent / "gateway.log",
        {**env, **server_env(late_stack)},
    )
    url = f"http://127.0.0.1:{port}"
    mcp = ["--server-url", f"{url}/mcp", "--transport", "http", "--method"]
    gateway.start()
    try:
        wait_ready(url, gateway, timeout_s=300, path="/healthz")
        ready = httpx.get(f"{url}/readyz", timeout=60)
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert (checks["broker"], checks["redis"]) == ("no broker answers", "connection refused")
        rest = httpx.get(f"{url}/v1/namespaces/probe/status", timeout=60)
        assert rest.status_code == 503 and rest.headers["retry-after"] == "1"
        assert_names_the_stack(rest.json()["detail"], late_stack)
        listed = inspector.run(*mcp, "tools/list")
        assert {t["name"] for t in listed.result["tools"]} == TOOLS, listed.stderr[-3000:]
        args = json.dumps({"namespace": "probe"})
        called = inspector.run(
            *mcp, "tools/call", "--tool-name", "get_status", "--tool-args-json", args
        )
        assert called.result["isError"] is True, called.result
        assert_names_the_stack(called.result["content"][0]["text"], late_stack)

        late_stack.start()
        args = json.dumps({**ADD, "namespace": "probe"})
        added = inspector.run(
            *mcp, "tools/call", "--tool-name", "add_memory", "--tool-args-json", args
        )
        assert added.code == 0 and not added.result.get("isError"), added.result
        assert added.result["structuredContent"]["exchanges"][0]["seq"] == 0
        status = httpx.get(f"{url}/v1/namespaces/probe/status", timeout=60)
        assert status.status_code == 200 and status.json()["sessions"][0]["last_seq_accepted"] == 0
        assert httpx.get(f"{url}/readyz", timeout=60).status_code == 200
    finally:
        gateway.stop()
