"""The model's context window as servers state it, and how prompts and replies share it."""

from __future__ import annotations

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI
from workers.llm.budget import ContextBudget
from workers.llm.errors import ContextOverflow
from workers.llm.window import ContextWindows, models_window, props_window, read_window
from workers.tokens import prompt_tokens


@pytest.mark.parametrize(
    ("body", "window"),
    [
        ({"default_generation_settings": {"n_ctx": 8192}}, 8192),
        ({"default_generation_settings": {"n_ctx": 0}}, None),
        ({"default_generation_settings": {"n_ctx": "8192"}}, None),
        ({"build_info": "b1"}, None),
        ([], None),
    ],
)
def test_props_window_reads_llama_cpp_served_context(body: object, window: int | None) -> None:
    assert props_window(body) == window


@pytest.mark.parametrize(
    ("body", "window"),
    [
        ({"data": [{"id": "m", "max_model_len": 32768}]}, 32768),
        (
            {"data": [{"id": "x", "context_length": 4096}, {"id": "m", "context_length": 2048}]},
            2048,
        ),
        ({"data": [{"id": "other", "meta": {"n_ctx_train": 32768}}]}, 32768),  # the only entry
        ({"data": [{"id": "x", "context_length": 4096}, {"id": "y"}]}, None),  # not ours
        ({"data": [{"id": "m", "owned_by": "openai"}]}, None),
        ({"data": [{"id": "m", "context_length": True}]}, None),
    ],
)
def test_models_window_reads_the_entry_of_the_model(body: object, window: int | None) -> None:
    assert models_window(body, "m") == window


@pytest.mark.parametrize("where", ["props", "models"])
async def test_read_window_finds_the_window_the_fake_server_states(where: str) -> None:
    with FakeOpenAI() as server:
        server.context_tokens = 3000
        server.states_context = where  # type: ignore[assignment]
        assert await read_window(server.url, "m", "key") == 3000
        server.states_context = "none"
        assert await read_window(server.url, "m", None) is None


async def test_context_windows_reads_once_and_falls_back_to_the_configured_window() -> None:
    asked: list[str] = []

    async def read(base_url: str, model: str, key: str | None) -> int | None:
        asked.append(model)
        return 4096 if model == "stated" else None

    windows = ContextWindows(read)
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    assert await windows.of(client, "stated", 1024) == 4096  # the server's wins
    assert await windows.of(client, "stated", None) == 4096
    assert await windows.of(client, "silent", 1024) == 1024
    assert await windows.of(client, "silent", None) is None
    assert asked == ["stated", "silent"]


async def test_context_windows_asks_again_after_an_unreachable_server() -> None:
    windows = ContextWindows()
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    assert await windows.of(client, "m", 2048) == 2048
    assert await windows.of(client, "m", None) is None  # not remembered as "states none"


def test_budget_reply_cap_shrinks_to_what_the_prompt_leaves() -> None:
    messages = [{"role": "user", "content": "word " * 500}]
    budget = ContextBudget(1000)
    cost = budget.cost(prompt_tokens(messages))
    assert cost > prompt_tokens(messages) * 1.1  # the margin
    assert budget.reply_cap(messages, 100) == 100
    assert budget.reply_cap(messages, 900) == 1000 - cost
    assert budget.reply_cap(messages, None) == 1000 - cost


def test_budget_refuses_a_prompt_that_leaves_too_little_for_its_reply() -> None:
    messages = [{"role": "user", "content": "word " * 900}]
    with pytest.raises(ContextOverflow, match="context window of 1000 tokens") as caught:
        ContextBudget(1000).reply_cap(messages, 500)
    assert caught.value.window_tokens == 1000 and caught.value.prompt_tokens > 900


def test_budget_room_is_what_more_text_may_take() -> None:
    messages = [{"role": "system", "content": "rules " * 100}]
    budget = ContextBudget(2000)
    room = budget.room(messages, 500)
    grown = [*messages, {"role": "user", "content": "x " * room}]
    assert prompt_tokens(grown) <= prompt_tokens(messages) + room + 8  # the message overhead
    assert budget.cost(prompt_tokens(messages) + room) + 500 <= 2000
    with pytest.raises(ValueError, match="must hold tokens"):
        ContextBudget(0)
