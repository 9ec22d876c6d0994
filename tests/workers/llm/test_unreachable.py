"""An LLM nobody answers at: the error says where it was asked and why it failed."""

from __future__ import annotations

import random

import pytest

from streams.stack.embedded import free_port
from workers.llm.calls import complete, make_client
from workers.llm.errors import CompletionError
from workers.llm.policy import RetryPolicy


async def no_sleep(_: float) -> None:
    return None


async def test_an_llm_that_refuses_connections_is_named_with_its_url_and_the_cause() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    client = make_client(url, None, timeout_s=5)
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.0, max_delay_s=0.0)
    with pytest.raises(CompletionError) as raised:
        await complete(
            client,
            "m",
            [{"role": "user", "content": "hi"}],
            json_mode=False,
            policy=policy,
            sleep=no_sleep,
            rng=random.Random(0),
        )
    text = str(raised.value)
    assert f"LLM at {url}/ unavailable after 2 attempt(s): APIConnectionError (" in text, text
