"""A success the client cannot read (a newer gateway's reply, a proxy's page): one of the
client's errors naming the request and what could not be read, not pydantic's."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lychee_client import NO_RETRY, AsyncLycheeClient, ClientError, LycheeClient, UnreadableReply
from schemas import QueryReply

NEWER = QueryReply(correlation_id="c", namespace="ns", status="ok").model_dump(mode="json")
BODIES = {
    "/newer": ("application/json", json.dumps(NEWER | {"schema_version": 99})),
    "/page": ("text/html", "<html>a proxy's sign-in page</html>"),
}


@pytest.fixture
def gateway() -> Iterator[str]:
    """A real HTTP server answering every POST 200 with the body its path's prefix names."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            kind, body = BODIES["/" + self.path.split("/")[1]]
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_newer_gateways_reply_names_the_version_and_the_upgrade(gateway: str) -> None:
    with (
        LycheeClient(f"{gateway}/newer", "ns", retry=NO_RETRY) as client,
        pytest.raises(UnreadableReply) as raised,
    ):
        client.search("anything")
    message = str(raised.value)
    assert message.startswith(f"POST {gateway}/newer/v1/namespaces/ns/search: 200")
    assert "(invalid reply: schema_version: unsupported schema_version 99" in message
    assert "upgrade lychee-memory-client" in message
    assert isinstance(raised.value, ClientError)


def test_a_page_that_is_not_json_is_the_same_error_from_the_async_client(gateway: str) -> None:
    async def search() -> None:
        async with AsyncLycheeClient(f"{gateway}/page", "ns", retry=NO_RETRY) as client:
            await client.search("anything")

    with pytest.raises(UnreadableReply) as raised:
        asyncio.run(search())
    assert "200, but this client cannot read its body (not JSON: " in str(raised.value)
