"""The HTTP client against a real gateway and stack: add, read your writes through search
(plan and evidence as the `schemas` models), list, status, forget, dead letters, and the
errors and retries a caller meets."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from lychee_client import (
    AsyncLycheeClient,
    ClientClosed,
    EvidenceItem,
    ExchangeIn,
    LycheeClient,
    LycheeHTTPError,
    Receipt,
    RetryPolicy,
    Turn,
    calls,
)
from lychee_client.retry import retried, retry_after_s
from schemas.gateway import RecordsPage
from schemas.plan import Plan
from streams.settings import GatewaySettings
from streams.stack.embedded import Child, free_port
from tests.clients.conftest import Gateway
from tests.streams.gateway.conftest import wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SEARCH_S = 120  # a cold query service on a busy machine takes longer than the default 15 s


def namespace() -> str:
    return f"cl-{uuid.uuid4().hex[:10]}"


def exchange(session: str, text: str) -> ExchangeIn:
    return ExchangeIn(session_id=session, turns=[Turn(role="user", speaker="Ilse", content=text)])


def test_client_add_search_list_status_forget(gateway: Gateway) -> None:
    with LycheeClient(gateway.url, namespace(), api_key=gateway.key) as client:
        receipt = client.add(
            [
                exchange("trip", "I am restoring a 1967 Vespa scooter in my garage."),
                {"session_id": "trip", "turns": [{"role": "assistant", "content": "Nice!"}]},
            ]
        )
        assert [e.seq for e in receipt.exchanges] == [0, 1]
        found = client.search("What vehicle am I restoring?", wait_for=receipt, timeout_s=SEARCH_S)
        assert isinstance(found.plan, Plan) and found.plan.semantic_queries
        assert all(isinstance(e, EvidenceItem) for e in found.evidence)
        assert any("Vespa" in e.text for e in found.evidence)
        assert "Vespa" in found.context and found.context_tokens == found.reply.context_tokens > 0
        turns = client.turns(session_id="trip")
        assert turns.kind == "turns" and [t["content"] for t in turns.items] == [
            "I am restoring a 1967 Vespa scooter in my garage.",
            "Nice!",
        ]
        assert client.records().kind == "records"
        status = client.status("trip")
        assert status.sessions[0].indexed_seq == 1 and status.searchable
        gone = client.forget("trip")
        assert gone.session_id == "trip" and sum(gone.rows_removed.values()) >= 2
        assert client.turns(session_id="trip").total == 0


async def test_async_client_reads_its_writes(gateway: Gateway) -> None:
    async with AsyncLycheeClient(gateway.url, namespace(), api_key=gateway.key) as client:
        receipt = await client.add([exchange("a1", "My sister Wren keeps bees on her roof.")])
        await client.wait_indexed(receipt)
        assert [t["content"] for t in await client.all_turns("a1", page_size=1)] == [
            "My sister Wren keeps bees on her roof."
        ]
        found = await client.search("Who keeps bees?", k=5, timeout_s=SEARCH_S)
        assert any("Wren" in e.text for e in found.evidence)
        assert (await client.forget_namespace()).session_id is None


def test_client_search_sends_its_token_budget() -> None:
    """A prompt's budget for the evidence goes with the search (the gateway and the query
    service honour it: tests/streams/gateway/test_gateway.py)."""
    assert calls.search("ns", "q", token_budget=500).json()["token_budget"] == 500
    assert calls.search("ns", "q").json().get("token_budget") is None
    with pytest.raises(ValidationError, match="token_budget"):
        calls.search("ns", "q", token_budget=3)


def test_client_add_sent_again_is_answered_with_the_first_receipt(gateway: Gateway) -> None:
    """What a retried add does: the client named the exchange before the first try, so the
    same request again adds nothing."""
    with LycheeClient(gateway.url, namespace(), api_key=gateway.key) as client:
        call = calls.add(client.namespace, [exchange("s", "I collect old maps of Lisbon.")])
        assert call.body is not None and call.json()["exchanges"][0]["exchange_id"]
        first, again = client.send(call), client.send(call)
        assert not first.exchanges[0].duplicate and again.exchanges[0].duplicate
        assert again.exchanges[0].seq == first.exchanges[0].seq == 0
        assert client.add([exchange("s", "Another one.")]).exchanges[0].seq == 1


def test_client_errors_name_the_status_and_the_problem(gateway: Gateway) -> None:
    with LycheeClient(gateway.url, "other-ns", api_key=gateway.key) as client:
        with pytest.raises(LycheeHTTPError) as denied:
            client.search("anything")
        assert denied.value.status == 403 and "other-ns" in denied.value.problem.detail
    with LycheeClient(gateway.url, namespace(), api_key="not-a-key") as client:
        with pytest.raises(LycheeHTTPError) as unknown:
            client.status()
        assert unknown.value.status == 401
    with LycheeClient(gateway.url, namespace(), api_key=gateway.key) as client:
        with pytest.raises(ValidationError):  # refused before sending: the same contract
            client.add([{"session_id": "bad id!", "turns": [{"role": "user", "content": "x"}]}])
        with pytest.raises(LycheeHTTPError) as wide:
            client.dead_letters()  # a key for `cl-*` only
        assert wide.value.status == 403
    with pytest.raises(ValueError, match="namespace: .*got 'cl-bad name'"):
        LycheeClient(gateway.url, "cl-bad name", api_key=gateway.key)  # refused before sending
    with LycheeClient(gateway.url, namespace(), api_key=gateway.key) as client:
        with pytest.raises(LycheeHTTPError) as invalid:
            client.records(page_size=501)  # the gateway's own 422, named
        assert invalid.value.status == 422 and invalid.value.attempts == 1
        assert "page_size" in invalid.value.problem.detail
    with LycheeClient(gateway.url, namespace(), api_key=gateway.root_key) as root:
        assert isinstance(root.dead_letters().reasons, list)
        dry = root.replay("memory.segments", dry_run=True)
        again = root.replay("memory.segments", dry_run=True)  # other tests' letters may be there
        assert dry.dry_run and again.replayed == dry.replayed and again.already == dry.already


@pytest.fixture
def stackless_gateway(tmp_path: Path) -> Iterator[str]:
    """A gateway whose broker and Redis do not answer: every namespace route is a 503 with
    Retry-After."""
    port = free_port()
    env = {
        "LYCHEE_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "LYCHEE_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "LYCHEE_LANCEDB_URI": str(tmp_path / "lance"),
    }
    argv = [sys.executable, "-m", "streams.cli", "gateway", "--host", "127.0.0.1"]
    child = Child(
        "gateway", [*argv, "--port", str(port)], tmp_path / "gw.log", {**os.environ, **env}
    )
    child.start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, child, path="/healthz")
        yield url
    finally:
        child.stop()


def test_client_retries_503_as_retry_after_says_then_raises(stackless_gateway: str) -> None:
    policy = RetryPolicy(attempts=3, max_wait_s=0.2)
    client = LycheeClient(stackless_gateway, "anyone", retry=policy)
    with client, pytest.raises(LycheeHTTPError) as down:
        client.status()
    assert down.value.status == 503 and down.value.attempts == 3
    assert down.value.retry_after_s == 1.0 and "after 3 tries" in str(down.value)
    assert "Kafka at" in down.value.problem.detail


def test_retry_rule_reads_retry_after_and_bounds_it() -> None:
    def answer(code: int, after: str | None = None) -> httpx.Response:
        return httpx.Response(code, headers={"Retry-After": after} if after else {})

    policy = RetryPolicy(attempts=4, backoff_s=0.5, max_wait_s=10)
    assert retried(answer(429)) and retried(answer(503)) and not retried(answer(500))
    assert policy.wait_s(1, answer(429, "7")) == 7
    assert policy.wait_s(1, answer(503, "3600")) == 10  # bounded
    assert retry_after_s(answer(503, "Wed, 21 Oct 2015 07:28:00 GMT")) == 0  # in the past
    assert retry_after_s(answer(503, "soon")) is None
    assert 0.25 <= policy.wait_s(1, answer(503)) <= 0.75  # no advice: jittered backoff
    assert 1.0 <= policy.wait_s(3, answer(503)) <= 3.0


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "localhost:8080", "ftp://127.0.0.1", "http://"])
def test_client_refuses_an_address_that_is_not_an_http_url_when_made(url: str) -> None:
    """Without its scheme every call would fail with a transport error, the first one late."""
    for client in (LycheeClient, AsyncLycheeClient):
        with pytest.raises(ValueError, match="is not an http:// or https:// address"):
            client(url, "ns")


def test_client_refuses_names_a_url_would_resolve_away_before_sending() -> None:
    """`forget("..")` would go out as `DELETE /v1/namespaces/NS`: the whole namespace."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    for bad in ("", ".", "..", "a/b", "x" * 129):
        with pytest.raises(ValueError, match="namespace: .*starting with a letter or digit"):
            LycheeClient(nowhere, bad)
    with pytest.raises(TypeError, match="namespace must be a string, got int"):
        LycheeClient(nowhere, 42)  # type: ignore[arg-type]
    with LycheeClient(nowhere, "ns") as client:
        for bad in (".", ".."):
            for call in (client.forget, client.flush, client.end_session):
                with pytest.raises(ValueError, match="session_id: must be 1-128 characters"):
                    call(bad)
        for read in (client.turns, client.records, client.status):
            with pytest.raises(ValueError, match="session_id: must be 1-128 characters"):
                read(session_id="bad id/..")


def test_a_retry_policy_without_a_first_try_is_refused() -> None:
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        RetryPolicy(attempts=0)


def test_an_api_key_with_a_line_break_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="api_key holds a line break"):
        LycheeClient("http://127.0.0.1:9", "ns", api_key="key\n")
    with pytest.raises(ValueError, match="api_key holds a line break"):
        AsyncLycheeClient("http://127.0.0.1:9", "ns", api_key="key\r\n")


def test_an_api_key_outside_ascii_is_refused_before_sending() -> None:
    """httpx would raise its own UnicodeEncodeError at the first request."""
    with pytest.raises(ValueError, match="api_key holds a non-ASCII character"):
        LycheeClient("http://127.0.0.1:9", "ns", api_key="lyk_é")
    with pytest.raises(ValueError, match="api_key holds a non-ASCII character"):
        AsyncLycheeClient("http://127.0.0.1:9", "ns", api_key="lyk_é")


async def test_a_closed_client_says_it_is_closed() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with LycheeClient(nowhere, "ns") as client:
        shared = client.with_namespace("other")
    for closed in (client, shared):
        with pytest.raises(ClientClosed, match=f"the client of {nowhere} is closed"):
            closed.status()
    with pytest.raises(ClientClosed), client:
        pass
    async with AsyncLycheeClient(nowhere, "ns") as aclient:
        pass
    with pytest.raises(ClientClosed, match="is closed"):
        await aclient.status()
    with pytest.raises(ClientClosed):
        async with aclient:
            pass


def test_an_http_error_names_the_whole_url(gateway: Gateway) -> None:
    """A base URL ending in /v1 sends to /v1/v1/...: the 404 must show it."""
    ns = namespace()
    client = LycheeClient(f"{gateway.url}/v1", ns, api_key=gateway.key)
    with client, pytest.raises(LycheeHTTPError) as missing:
        client.status()
    assert missing.value.status == 404
    assert str(missing.value).startswith(f"GET {gateway.url}/v1/v1/namespaces/{ns}/status: 404")
    assert missing.value.path == f"/v1/namespaces/{ns}/status"


def test_add_many_splits_at_the_gateways_limits_and_merges_the_receipts() -> None:
    """One add over the gateway's limits is a 413; `add_many` sends parts under them."""
    defaults = GatewaySettings.model_fields
    assert defaults["max_exchanges"].default == calls.MAX_EXCHANGES
    assert defaults["max_body_bytes"].default == calls.MAX_BODY_BYTES
    many = [exchange(f"s{i % 3}", f"fact {i}") for i in range(2001)]
    assert [len(c.body.exchanges) for c in calls.adds("ns", many)] == [1000, 1000, 1]  # type: ignore[union-attr]
    big = [exchange("s", "é" * 150_000) for _ in range(60)]  # 300 kB each as UTF-8
    parts = calls.adds("ns", big)
    assert len(parts) == 2 and sum(len(c.body.exchanges) for c in parts) == 60  # type: ignore[union-attr]
    assert all(
        len(httpx.Request("POST", "/", json=c.json()).content) <= calls.MAX_BODY_BYTES
        for c in parts
    )
    assert calls.adds("ns", []) == []

    def receipt(session: str, seq: int) -> Receipt:
        part = {"session_id": session, "partition": 0}
        return Receipt.model_validate(
            {
                "namespace": "ns",
                "sessions": [{**part, "last_seq": seq, "offsets": [seq]}],
                "exchanges": [
                    {
                        **part,
                        "exchange_id": f"e{seq}",
                        "seq": seq,
                        "offset": seq,
                        "duplicate": False,
                    }
                ],
            }
        )

    one = calls.merged([receipt("a", 0), receipt("b", 1), receipt("a", 2)])
    assert [(s.session_id, s.last_seq, s.offsets) for s in one.sessions] == [
        ("a", 2, [0, 2]),
        ("b", 1, [1]),
    ]
    assert [e.seq for e in one.exchanges] == [0, 1, 2]


class _ForgetsBetweenPages(LycheeClient):
    """A client whose first listing meets a forget of another session between its pages,
    as a concurrent writer's would land."""

    forget_between: str | None = None

    def turns(
        self, *, session_id: str | None = None, page: int = 1, page_size: int = 50
    ) -> RecordsPage:
        got = super().turns(session_id=session_id, page=page, page_size=page_size)
        if page == 1 and self.forget_between is not None:
            self.forget(self.forget_between)
            self.forget_between = None
        return got


def test_a_listing_read_while_a_session_is_forgotten_skips_no_row(gateway: Gateway) -> None:
    """Pages are read by position: a forget of an earlier session between two pages moves
    the next page's first row back onto the page already read (skipped before)."""
    with _ForgetsBetweenPages(gateway.url, namespace(), api_key=gateway.key) as client:
        early = [exchange("a-early", f"Early note {i}.") for i in range(3)]
        late = [exchange("b-late", f"Late note {i}.") for i in range(5)]
        client.wait_indexed(client.add([*early, *late]), timeout_s=SEARCH_S)
        client.forget_between = "a-early"
        listed = [t["content"] for t in client.all_turns(page_size=4)]
        assert listed == [f"Late note {i}." for i in range(5)]
