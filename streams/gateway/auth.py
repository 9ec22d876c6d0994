"""API keys: a file of hashed keys, each limited to its namespaces.

The file (`LYCHEE_API_KEYS_FILE`) holds SHA-256 digests, never keys: a key is 32 random bytes,
so a fast hash is enough (there is nothing to guess), and a leaked file grants nothing. A
presented key is hashed and compared with every stored digest in constant time. A namespace
pattern is a name, a prefix ending in `*`, or `*` for every namespace.

    {"keys": [{"name": "agent-alice", "sha256": "<hex>", "namespaces": ["alice", "team-*"]}]}

`lychee gateway keys add NAME --namespace NS` creates a key, prints it once and stores its
digest.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from streams.gateway.errors import KeyFileError

KEY_PREFIX = "lyk_"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _allows(patterns: tuple[str, ...], namespace: str) -> bool:
    return any(
        p == "*" or p == namespace or (p.endswith("*") and namespace.startswith(p[:-1]))
        for p in patterns
    )


@dataclass(frozen=True)
class Principal:
    """Who calls: a key's name and namespace patterns (None: local caller, no keys configured)."""

    name: str
    namespaces: tuple[str, ...] | None

    @classmethod
    def local(cls) -> Principal:
        return cls("local", None)

    def allows(self, namespace: str) -> bool:
        return self.namespaces is None or _allows(self.namespaces, namespace)

    def sees_all(self) -> bool:
        """Allowed every namespace (a local caller, or a key for `*`): may see stack-wide
        figures, which mix every namespace."""
        return self.namespaces is None or "*" in self.namespaces

    def default_namespace(self) -> str | None:
        """The key's namespace when it has exactly one, named without a wildcard."""
        if self.namespaces and len(self.namespaces) == 1 and "*" not in self.namespaces[0]:
            return self.namespaces[0]
        return None


@dataclass(frozen=True)
class ApiKey:
    name: str
    sha256: bytes
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class KeyRing:
    keys: tuple[ApiKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keys)

    @classmethod
    def load(cls, path: Path | None) -> KeyRing:
        """The keys of `path`; an empty ring when no file is configured."""
        if path is None:
            return cls()
        entries = _read(path)
        if not entries:
            raise KeyFileError(f"{path}: no keys; add one with `lychee gateway keys add`")
        keys = []
        for i, e in enumerate(entries):
            where = f"{path}: keys[{i}]"
            try:
                raw = bytes.fromhex(e["sha256"])
                namespaces = tuple(str(n) for n in e["namespaces"])
                name = str(e["name"])
            except (KeyError, TypeError, ValueError) as exc:
                raise KeyFileError(f"{where}: needs name, sha256 (hex) and namespaces") from exc
            if len(raw) != 32 or not namespaces:
                raise KeyFileError(f"{where}: sha256 must be 64 hex digits, namespaces non-empty")
            keys.append(ApiKey(name, raw, namespaces))
        return cls(tuple(keys))

    def verify(self, presented: str) -> Principal | None:
        """The key's principal, or None. Every stored digest is compared, match or not."""
        wanted = hashlib.sha256(presented.encode()).digest()
        found: ApiKey | None = None
        for key in self.keys:
            if hmac.compare_digest(key.sha256, wanted):
                found = key
        return Principal(found.name, found.namespaces) if found else None


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise KeyFileError(f"{path}: no such file") from exc
    except orjson.JSONDecodeError as exc:
        raise KeyFileError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeyFileError(f'{path}: expected {{"keys": [...]}}')
    return list(data["keys"])


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the file atomically, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps({"keys": entries}, option=orjson.OPT_INDENT_2))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_key(path: Path, name: str, namespaces: list[str]) -> str:
    """Create a key for `namespaces`, store its digest under `name`, return the key."""
    entries = _read(path) if path.exists() else []
    if any(e.get("name") == name for e in entries):
        raise KeyFileError(f"{path}: a key named {name!r} exists; revoke it first")
    if not namespaces:
        raise KeyFileError("a key needs at least one namespace (or '*')")
    key = new_key()
    entries.append({"name": name, "sha256": digest(key), "namespaces": namespaces})
    _write(path, entries)
    return key


def revoke_key(path: Path, name: str) -> None:
    entries = _read(path)
    kept = [e for e in entries if e.get("name") != name]
    if len(kept) == len(entries):
        raise KeyFileError(f"{path}: no key named {name!r}")
    _write(path, kept)


def list_keys(path: Path) -> list[dict[str, Any]]:
    return [{"name": e.get("name"), "namespaces": e.get("namespaces")} for e in _read(path)]


def presented_key(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key of `Authorization: Bearer <key>` or `X-API-Key: <key>`."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return x_api_key.strip() if x_api_key and x_api_key.strip() else None


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address: what the gateway binds, and what a request must be
    addressed to, without keys."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name a request was addressed to: its Host header without the port ("" if none)."""
    try:
        return urlsplit(f"//{host_header}").hostname or ""
    except ValueError:  # an unbalanced [ or a bad port
        return ""
