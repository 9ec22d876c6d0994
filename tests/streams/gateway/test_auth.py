"""API keys: hashed at rest, limited to their namespaces; no keys means loopback only."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from streams.gateway.auth import (
    KeyRing,
    KeyStore,
    Principal,
    add_key,
    digest,
    list_keys,
    presented_key,
    revoke_key,
)
from streams.gateway.errors import GatewayConfigError, KeyFileError
from streams.gateway.server import check_binding


def test_keys_file_holds_digests_only_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key = add_key(path, "agent-a", ["team-a"])
    raw = path.read_text()
    assert key not in raw and digest(key) in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list_keys(path) == [{"name": "agent-a", "namespaces": ["team-a"]}]


def test_keyring_verify_known_key_gives_its_namespaces_unknown_gives_none(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    a = add_key(path, "a", ["team-a"])
    b = add_key(path, "b", ["team-b", "shared-*"])
    ring = KeyRing.load(path)
    pa, pb = ring.verify(a), ring.verify(b)
    assert pa == Principal("a", ("team-a",)) and pb is not None
    assert pa.allows("team-a") and not pa.allows("team-b") and not pa.allows("team-a2")
    assert pb.allows("shared-x") and pb.allows("team-b") and not pb.allows("team-a")
    assert ring.verify(a + "x") is None and ring.verify("") is None


def test_keyring_revoked_key_no_longer_verifies(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    a = add_key(path, "a", ["x"])
    b = add_key(path, "b", ["y"])
    revoke_key(path, "a")
    ring = KeyRing.load(path)
    assert ring.verify(a) is None and ring.verify(b) is not None
    with pytest.raises(KeyFileError, match="no key named 'a'"):
        revoke_key(path, "a")


def test_keyring_malformed_file_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{"name": "a", "sha256": "zz", "namespaces": ["x"]}]}))
    with pytest.raises(KeyFileError, match=r"keys\[0\]"):
        KeyRing.load(path)
    path.write_text("not json")
    with pytest.raises(KeyFileError, match="not valid JSON"):
        KeyRing.load(path)
    path.write_text(json.dumps({"keys": []}))
    with pytest.raises(KeyFileError, match="no keys"):
        KeyRing.load(path)
    with pytest.raises(KeyFileError, match="no such file"):
        KeyRing.load(tmp_path / "missing.json")


def test_keyring_unset_file_is_an_empty_ring() -> None:
    assert not KeyRing.load(None)


def test_principal_default_namespace_only_for_one_exact_name() -> None:
    assert Principal("a", ("team-a",)).default_namespace() == "team-a"
    assert Principal("a", ("team-*",)).default_namespace() is None
    assert Principal("a", ("x", "y")).default_namespace() is None
    assert Principal.local().allows("anything")


def test_presented_key_reads_bearer_or_x_api_key() -> None:
    assert presented_key("Bearer abc", None) == "abc"
    assert presented_key("bearer  abc ", None) == "abc"
    assert presented_key(None, "xyz") == "xyz"
    assert presented_key("Basic abc", None) is None
    assert presented_key(None, " ") is None


def test_check_binding_without_keys_refuses_non_loopback(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="LYCHEE_API_KEYS_FILE"):
        check_binding("0.0.0.0", KeyRing())
    assert "loopback" in (check_binding("127.0.0.1", KeyRing()) or "")
    assert check_binding("::1", KeyRing()) is not None
    path = tmp_path / "keys.json"
    add_key(path, "a", ["x"])
    assert check_binding("0.0.0.0", KeyRing.load(path)) is None


@pytest.mark.parametrize(
    ("pattern", "allowed", "refused"),
    [
        ("acme", ["acme"], ["acmecorp", "acme-evil", "acm"]),
        ("acme-*", ["acme-a", "acme-evil"], ["acme", "acme-", "acmecorp", "acme_a"]),
        ("acme_*", ["acme_a"], ["acme", "acme-a"]),
        ("acme.*", ["acme.a"], ["acmeXa"]),
        ("acme:*", ["acme:a"], ["acme"]),
        ("*", ["acme", "anything-else"], []),
    ],
)
def test_principal_patterns_mean_exactly_what_they_read_as(
    pattern: str, allowed: list[str], refused: list[str]
) -> None:
    principal = Principal("k", (pattern,))
    assert [ns for ns in allowed if not principal.allows(ns)] == []
    assert [ns for ns in refused if principal.allows(ns)] == []


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("acme*", "would also grant names that merely start alike, such as 'acmecorp'"),
        ("a*", "must follow a separator"),
        ("ac*me", "stands only at the end"),
        ("acme-**", "stands only at the end"),
        ("*-acme", "stands only at the end"),
        ("", "empty"),
    ],
)
def test_keys_add_refuses_a_pattern_without_a_separator_before_its_star(
    tmp_path: Path, pattern: str, says: str
) -> None:
    path = tmp_path / "keys.json"
    with pytest.raises(KeyFileError, match=re.escape(says)):
        add_key(path, "k", [pattern])
    assert not path.exists()


def test_keyring_refuses_a_file_holding_a_pattern_that_grants_more_than_it_reads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.json"
    entry = {"name": "old", "sha256": "0" * 64, "namespaces": ["acme*"]}
    path.write_text(json.dumps({"keys": [entry]}))
    with pytest.raises(KeyFileError, match=r"keys\[0\] \(old\): 'acme\*': a '\*' must follow"):
        KeyRing.load(path)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_keystore_takes_up_a_revoked_or_added_key_once_its_ttl_passed(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    a = add_key(path, "a", ["x"])
    clock = Clock()
    store = KeyStore(path, ttl_s=2.0, clock=clock)
    assert store.verify(a) is not None
    revoke_key(path, "a")
    b = add_key(path, "b", ["y"])
    assert store.verify(a) is not None  # within the ttl: not looked at again
    clock.now = 2.0
    assert store.verify(a) is None and store.verify(b) == Principal("b", ("y",))


def test_keystore_refuses_every_key_while_the_file_is_broken_then_recovers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.json"
    a = add_key(path, "a", ["x"])
    good = path.read_bytes()
    clock = Clock()
    store = KeyStore(path, ttl_s=1.0, clock=clock)
    path.write_text("{not json")
    clock.now = 1.0
    assert store.verify(a) is None and bool(store)  # still the keyed mode, nobody in
    path.write_bytes(good + b"\n")
    clock.now = 2.0
    assert store.verify(a) == Principal("a", ("x",))
    path.unlink()
    clock.now = 3.0
    assert store.verify(a) is None and bool(store)
