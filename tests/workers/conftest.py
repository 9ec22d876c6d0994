"""Fixtures shared by the tests of the LLM-calling code: a fake server and its client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI
from workers.llm.calls import make_client


class Sleeps:
    """Records the waits instead of sleeping them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


@pytest.fixture
async def client(server: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    c = make_client(server.url, None, timeout_s=5.0)
    yield c
    await c.close()
