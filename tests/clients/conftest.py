"""One gateway process with API keys in front of the session's stack, for the HTTP client
and the framework integrations built on it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from streams.gateway.auth import add_key
from streams.stack.embedded import Child, Stack, free_port
from tests.streams.gateway.conftest import wait_ready


@dataclass(frozen=True)
class Gateway:
    url: str
    key: str  # may use the namespaces `cl-*`
    root_key: str  # may use every namespace: dead letters


@pytest.fixture(scope="session")
def gateway(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    work = tmp_path_factory.mktemp("client-gateway")
    keys_file = work / "keys.json"
    key = add_key(keys_file, "client", ["cl-*"])
    root = add_key(keys_file, "root", ["*"])
    env = {
        **os.environ,
        **stack.env(),
        "LYCHEE_API_KEYS_FILE": str(keys_file),
        "LYCHEE_TOPIC_PARTITIONS": "4",
        "LYCHEE_GATEWAY_PRODUCE_TIMEOUT_S": "120",
    }
    port = free_port()
    argv = [sys.executable, "-m", "streams.cli", "gateway", "--host", "127.0.0.1"]
    child = Child("client-gateway", [*argv, "--port", str(port)], work / "gateway.log", env)
    child.start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, child)
        yield Gateway(url, key, root)
    finally:
        child.stop()
