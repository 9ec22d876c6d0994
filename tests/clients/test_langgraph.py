"""The LangGraph store over the service, with the real `langgraph`: its store API, the async
forms, and a graph whose node writes a memory that a later run, through another store object,
recalls."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from lychee_client import AsyncLycheeClient, LycheeClient
from lychee_client.langgraph import LycheeStore, exchange_of, session_of
from tests.clients.conftest import Gateway

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SEARCH_S = 120


def store_of(gateway: Gateway, namespace: str) -> LycheeStore:
    client = LycheeClient(gateway.url, namespace, api_key=gateway.key)
    return LycheeStore(client, search_timeout_s=SEARCH_S)


def test_store_put_get_update_search_list_delete(gateway: Gateway) -> None:
    ns = f"cl-lg-{uuid.uuid4().hex[:8]}"
    store = store_of(gateway, ns)
    alice, bob = ("memories", "alice"), ("memories", "bob")
    store.put(alice, "diet", {"text": "Alice is vegetarian and avoids mushrooms", "kind": "food"})
    store.put(alice, "pet", {"text": "Alice has a parrot named Kiwi", "kind": "pet", "age": 4})
    store.put(bob, "pet", {"text": "Bob walks his greyhound every morning", "kind": "pet"})
    store.put(("settings",), "theme", {"dark": True})

    got = store.get(alice, "pet")
    assert got is not None and got.value["text"] == "Alice has a parrot named Kiwi"
    assert got.namespace == alice and got.key == "pet"
    assert store.get(alice, "absent") is None

    store.put(alice, "pet", {"text": "Alice has a parrot named Mango", "kind": "pet", "age": 5})
    newer = store.get(alice, "pet")
    assert newer is not None and newer.value["text"].endswith("Mango")
    assert newer.created_at == got.created_at and newer.updated_at > got.updated_at

    assert {i.key for i in store.search(("memories",))} == {"diet", "pet"}
    assert len(store.search(("memories",))) == 3
    assert len(store.search(("memories",), query="  ")) == 3  # a blank query lists, as none
    pet_owners = sorted(i.namespace for i in store.search(("memories",), filter={"kind": "pet"}))
    assert pet_owners == [alice, bob]
    pets = store.search(("memories", "alice"), filter={"kind": "pet", "age": {"$gte": 5}})
    assert [(i.key, i.value["age"]) for i in pets] == [("pet", 5)]
    hits = store.search(("memories",), query="which bird does Alice keep?", limit=2)
    assert hits and hits[0].namespace == alice and hits[0].key == "pet"
    assert hits[0].value["text"].endswith("Mango")  # the newest version, whichever matched

    assert store.list_namespaces() == [("memories", "alice"), ("memories", "bob"), ("settings",)]
    assert store.list_namespaces(prefix=("memories",), max_depth=1) == [("memories",)]
    assert store.list_namespaces(suffix=("bob",)) == [("memories", "bob")]

    store.delete(alice, "pet")
    assert store.get(alice, "pet") is None
    turns = LycheeClient(gateway.url, ns, api_key=gateway.key).turns(
        session_id=session_of(alice, "pet")
    )
    assert turns.total == 0  # every version is gone from the service, not hidden
    assert [i.key for i in store.search(("memories", "alice"))] == ["diet"]


async def test_store_async_forms_and_batch(gateway: Gateway) -> None:
    ns = f"cl-lg-{uuid.uuid4().hex[:8]}"
    async with AsyncLycheeClient(gateway.url, ns, api_key=gateway.key) as aclient:
        sync = LycheeClient(gateway.url, ns, api_key=gateway.key)
        store = LycheeStore(sync, aclient, search_timeout_s=SEARCH_S)
        await store.aput(("docs",), "a", {"text": "the harbour closes at dusk"})
        item = await store.aget(("docs",), "a")
        assert item is not None and item.value == {"text": "the harbour closes at dusk"}
        results = await store.abatch(
            [
                PutOp(("docs",), "b", {"text": "ferries leave hourly"}),
                GetOp(("docs",), "b"),
                SearchOp(("docs",), None, 10, 0, None),
                SearchOp(("docs",), None, 10, 0, "when do the ferries go?"),
                PutOp(("docs",), "a", None),
                GetOp(("docs",), "a"),
            ]
        )
        assert results[0] is None and results[1] is not None
        assert results[1].value == {"text": "ferries leave hourly"}
        assert sorted(i.key for i in results[2]) == ["a", "b"]
        assert results[3][0].key == "b"
        assert results[4] is None and results[5] is None
        assert await store.alist_namespaces() == [("docs",)]
        threaded = LycheeStore(sync)  # no async client: the sync batch in a worker thread
        got = await threaded.aget(("docs",), "b")
        assert got is not None and got.value == {"text": "ferries leave hourly"}
        await store.adelete(("docs",), "b")
        assert await store.asearch(("docs",)) == []
        assert await aclient.all_turns() == []


class State(TypedDict):
    user: str
    message: str
    recalled: list[str]


def memory_graph(store: BaseStore):  # type: ignore[no-untyped-def]
    """One node: a message starting `remember:` is written to the user's memories; every
    message is answered with what the memories hold about it."""

    def remember_and_recall(state: State, *, store: BaseStore) -> dict[str, list[str]]:
        where = ("memories", state["user"])
        if state["message"].startswith("remember:"):
            fact = state["message"].removeprefix("remember:").strip()
            store.put(where, uuid.uuid4().hex, {"text": fact})
        hits = store.search(where, query=state["message"], limit=3)
        return {"recalled": [h.value["text"] for h in hits]}

    graph = StateGraph(State)
    graph.add_node("remember_and_recall", remember_and_recall)
    graph.add_edge(START, "remember_and_recall")
    graph.add_edge("remember_and_recall", END)
    return graph.compile(store=store)


def test_graph_writes_a_memory_and_a_later_run_recalls_it(gateway: Gateway) -> None:
    ns = f"cl-lg-{uuid.uuid4().hex[:8]}"
    first = memory_graph(store_of(gateway, ns)).invoke(
        {
            "user": "noor",
            "message": "remember: my violin teacher is called Ottoline",
            "recalled": [],
        }
    )
    assert "my violin teacher is called Ottoline" in first["recalled"]
    other = memory_graph(store_of(gateway, ns)).invoke(
        {"user": "sam", "message": "remember: I am allergic to peanuts", "recalled": []}
    )
    assert other["recalled"] == ["I am allergic to peanuts"]  # another user's namespace
    later = memory_graph(store_of(gateway, ns)).invoke(
        {"user": "noor", "message": "who teaches me the violin?", "recalled": []}
    )
    assert later["recalled"][0] == "my violin teacher is called Ottoline"


def test_store_answers_as_langgraphs_reference_store(gateway: Gateway) -> None:
    """LangGraph ships no store conformance tests (its wheel holds none; the conformance
    package covers checkpointers): the same operations run against `InMemoryStore`, the
    reference, and this store must give the same items, filters and namespaces."""
    ours = store_of(gateway, f"cl-lg-{uuid.uuid4().hex[:8]}")
    reference = InMemoryStore()
    writes = [
        (("users", "u1", "prefs"), "lang", {"value": "en", "n": 1}),
        (("users", "u1", "prefs"), "tz", {"value": "UTC", "n": 2, "tags": ["a", "b"]}),
        (("users", "u2", "prefs"), "lang", {"value": "pt", "n": 3, "meta": {"src": "x"}}),
        (("users", "u2", "facts"), "job", {"value": "nurse", "n": 4}),
        (("cache", "v1"), "k", {"value": 0}),
        (("users", "u1", "prefs"), "lang", {"value": "fr", "n": 5}),  # an update
    ]
    for store in (ours, reference):
        store.batch([PutOp(ns, key, value) for ns, key, value in writes])
        store.delete(("users", "u2", "facts"), "job")
        store.put(("users", "u2", "facts"), "pet", {"value": "cat", "n": 6})

    def view(store: BaseStore) -> list[object]:
        def items(prefix: tuple[str, ...], **kw: object) -> list[tuple[object, ...]]:
            found = store.search(prefix, limit=50, **kw)  # type: ignore[arg-type]
            return sorted((i.namespace, i.key, repr(i.value)) for i in found)

        got = [store.get(ns, key) for ns, key, _ in writes]
        return [
            [(i.namespace, i.key, i.value) if i else None for i in got],
            items(()),
            items(("users",)),
            items(("users", "u1")),
            items(("users",), filter={"value": "pt"}),
            items(("users",), filter={"n": {"$gt": 2}}),
            items(("users",), filter={"n": {"$ne": 6}, "meta": {"src": "x"}}),
            items(("users",), filter={"tags": ["a", "b"]}),
            len(store.search(("users",), limit=2, offset=3)),
            store.list_namespaces(),
            store.list_namespaces(prefix=("users",)),
            store.list_namespaces(prefix=("users", "*", "prefs")),
            store.list_namespaces(suffix=("facts",)),
            store.list_namespaces(max_depth=2),
            store.list_namespaces(limit=2, offset=1),
        ]

    assert view(ours) == view(reference)


def test_a_value_larger_than_a_turn_is_refused_naming_its_key() -> None:
    with pytest.raises(ValueError, match="the item 'big' is .* characters as JSON"):
        exchange_of(PutOp(("mem",), "big", {"text": "z" * 250_000}))


def test_a_value_is_measured_as_written_and_a_non_json_value_is_refused_naming_its_key() -> None:
    """A CJK value counts its characters, not the six of each escape; a datetime (which
    InMemoryStore keeps as the object) cannot come back from JSON as one: refused, named."""
    cjk = exchange_of(PutOp(("x",), "cjk", {"text": "漢" * 40_000}))
    assert "漢" * 40_000 in cjk.turns[0].content
    with pytest.raises(ValueError, match=r"the item 'dt' holds a datetime\.datetime"):
        exchange_of(PutOp(("x",), "dt", {"when": {"at": datetime(2024, 1, 1)}}))


def test_a_batch_over_the_gateways_exchange_limit_is_added_in_parts(gateway: Gateway) -> None:
    store = store_of(gateway, f"cl-lg-{uuid.uuid4().hex[:8]}")
    store.batch([PutOp(("b",), f"k{i}", {"i": i}) for i in range(1001)])
    first, last = store.get(("b",), "k0"), store.get(("b",), "k1000")
    assert first is not None and first.value == {"i": 0}
    assert last is not None and last.value == {"i": 1000}


def test_search_finds_the_prefixs_items_when_the_namespace_outranks_them(
    gateway: Gateway,
) -> None:
    """More items of other users match the query better than the service's largest k holds:
    the prefix's items are still returned, as InMemoryStore returns them."""
    store = store_of(gateway, f"cl-lg-{uuid.uuid4().hex[:8]}")
    others = [PutOp(("other", f"u{i}"), "city", {"text": f"Porto, Porto {i}"}) for i in range(260)]
    trip = "We took a slow train along the coast, then a day in Porto to see the bridges"
    mine = [PutOp(("mine",), f"m{i}", {"text": f"{trip} ({i})", "kind": "trip"}) for i in range(2)]
    store.batch([*others, *mine])
    found = store.search(("mine",), query="Porto", limit=10)
    assert sorted(i.key for i in found) == ["m0", "m1"]
    trips = store.search((), query="Porto", filter={"kind": "trip"}, limit=10)
    assert sorted(i.key for i in trips) == ["m0", "m1"]


def test_search_scores_are_the_ranking_and_follow_the_order(gateway: Gateway) -> None:
    store = store_of(gateway, f"cl-lg-{uuid.uuid4().hex[:8]}")
    store.batch(
        [PutOp(("mine",), f"m{i}", {"text": f"I visited Porto in 200{i}"}) for i in range(3)]
    )
    found = store.search(("mine",), query="I visited Porto in 2001")
    scores = [i.score for i in found]
    assert len(scores) == 3 and all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
