"""The OpenAI-compatible embedder's HTTP errors, translated at the embedder (STYLE 5)."""

from __future__ import annotations

import openai
import pytest

from streams.stack.embedded import free_port
from tests.fakes.openai_server import FakeOpenAI, status
from workers.embedding.openai_api import OpenAIEmbedder
from workers.errors import Refused, TemporarilyUnavailable, Unprocessable


def embedder(url: str) -> OpenAIEmbedder:
    client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=5)
    return OpenAIEmbedder(client, "text-embedding-3-small", dim=16)


@pytest.mark.parametrize(
    ("reply", "error", "retry_after"),
    [
        (status(503, {}), TemporarilyUnavailable, None),
        (status(500, {}), TemporarilyUnavailable, None),
        (status(429, {"Retry-After": "7"}), TemporarilyUnavailable, 7.0),
        (status(401, {}), Refused, None),
        (status(404, {}), Refused, None),
        (status(400, {}, {"error": {"message": "input too long"}}), Unprocessable, None),
    ],
)
def test_openai_embedder_http_error_becomes_what_the_stage_does(
    reply: object, error: type[Exception], retry_after: float | None
) -> None:
    with FakeOpenAI(embedding_dim=16) as server:
        server.script_embeddings(reply)  # type: ignore[arg-type]
        with pytest.raises(error) as err:
            embedder(server.url).embed(["hello"])
        assert embedder(server.url).embed(["hello"]).shape == (1, 16)  # next call is fine
    if error is Refused:
        assert "LYCHEE_LLM_API_KEY" in err.value.hint  # type: ignore[attr-defined]
        assert not isinstance(err.value, Unprocessable)
    if retry_after is not None:
        assert err.value.retry_after_s == retry_after  # type: ignore[attr-defined]
    if error is Unprocessable:
        assert "input too long" in str(err.value)


def test_openai_embedder_unreachable_endpoint_is_temporarily_unavailable() -> None:
    with pytest.raises(TemporarilyUnavailable, match="unreachable"):
        embedder(f"http://127.0.0.1:{free_port()}/v1").embed(["hello"])
