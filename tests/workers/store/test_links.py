"""The links table in a real LanceDB directory: stored once, read by record, removed with
its records by forget and retention."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas.supersession import LinkKind, Supersession
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from workers.store import LINKS, EvidenceStore


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    return EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)


def link(ns: str, older: str, newer: str, kind: LinkKind = LinkKind.supersedes) -> Supersession:
    return Supersession(
        namespace=ns,
        kind=kind,
        older_id=older,
        newer_id=newer,
        changed_at=datetime(2024, 4, 2),
        reason="heater: 900 watts then 650 watts",
        found_by="rule:value-change",
    )


def two_sessions(store: EvidenceStore, ns: str = "a") -> tuple[str, str, str]:
    """A record only in s1, one only in s2, one in both; their ids."""
    emb = HashEmbedder()
    first = batch(ns, 0, ["The heater draws 900 watts", "Ann keeps bees"])
    second = batch(ns, 1, ["The heater draws 650 watts", "ann keeps BEES"], session="s2")
    index_batches(store, [first, second], emb)
    return first.records[0].record_id, second.records[0].record_id, first.records[1].record_id


def test_links_stored_once_and_read_by_record(store: EvidenceStore) -> None:
    assert store.links.of_namespace("a") == []  # no table yet: nothing to migrate
    assert store.links.upsert([link("a", "r1", "r2"), link("a", "r1", "r2")]) == 1
    assert store.links.upsert([link("a", "r1", "r2")]) == 0  # found again: one row
    store.links.upsert([link("a", "r2", "r3", LinkKind.conflict), link("b", "r1", "r2")])
    assert [x.newer_id for x in store.links.of_namespace("a")] == ["r2", "r3"]
    (only,) = store.links.of_namespace("a", {"r3"})
    assert only.kind is LinkKind.conflict and only.found_by == "rule:value-change"
    assert store.count(LINKS, "b") == 1


def test_supersession_rejects_a_self_link_and_an_unknown_finder() -> None:
    with pytest.raises(ValueError, match="itself"):
        link("a", "r1", "r1")
    with pytest.raises(ValueError, match="rule:<name>"):
        Supersession(namespace="a", kind="supersedes", older_id="x", newer_id="y", found_by="me")


def test_forget_session_removes_the_links_of_its_records_only(store: EvidenceStore) -> None:
    old, new, shared = two_sessions(store)
    store.links.upsert([link("a", old, new), link("a", shared, new, LinkKind.conflict)])
    store.links.upsert([link("b", old, new)])
    done = store.forget("a", "s1", HashEmbedder())
    assert done.rows_removed[LINKS] == 1  # `old` went with s1; `shared` is also in s2
    assert [(x.older_id, x.newer_id) for x in store.links.of_namespace("a")] == [(shared, new)]
    assert store.count(LINKS, "b") == 1


def test_forget_namespace_removes_its_links(store: EvidenceStore) -> None:
    old, new, _ = two_sessions(store)
    store.links.upsert([link("a", old, new)])
    store.forget("a", None, HashEmbedder())
    assert store.links.of_namespace("a") == []


def test_retention_removes_links_with_expired_records(store: EvidenceStore) -> None:
    old, new, _ = two_sessions(store)
    store.links.upsert([link("a", old, new)])
    done = store.expire(datetime(2030, 1, 1, tzinfo=UTC), HashEmbedder())
    assert done.rows_removed[LINKS] == 1 and store.links.of_namespace("a") == []
