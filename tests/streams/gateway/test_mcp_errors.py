"""An MCP tool's error reaches the host as one line, whichever part of ours raised it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from streams.errors import StoreMissing
from streams.gateway.errors import Unavailable
from streams.gateway.mcp import _call


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
