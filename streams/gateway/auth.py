"""API keys: a file of hashed keys, each limited to its namespaces.

The file (`LYCHEE_API_KEYS_FILE`) holds SHA-256 digests, never keys: a key is 32 random bytes,
so a fast hash is enough (there is nothing to guess), and a leaked file grants nothing. A
presented key is hashed and compared with every stored digest in constant time.

A namespace pattern means one of three things: `acme` that namespace exactly; `acme-*` the
names under `acme-` (a `*` that follows a separator, one of `-_./:`); `*` every namespace.
Any other `*` (`acme*`, which would also match `acmecorp`) is refused where a key is added
and where the file is loaded, so that a pattern never grants more than it reads as.

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson
import structlog

from schemas.base import NAME_RULE, is_name, shown
from streams.gateway.errors import KeyFileError

log = structlog.get_logger("lychee.gateway")

KEY_PREFIX = "lyk_"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


SEPARATORS = "-_./:"


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a namespace pattern, or None when it is one."""
    if not pattern:
        return "a namespace pattern is empty"
    if pattern == "*" or "*" not in pattern:
        return None
    if pattern.count("*") > 1 or not pattern.endswith("*"):
        return (
            f"{pattern!r}: a '*' stands only at the end of a pattern (or alone, for every "
            "namespace)"
        )
    if len(pattern) < 3 or pattern[-2] not in SEPARATORS:
        return (
            f"{pattern!r}: a '*' must follow a separator ({' '.join(SEPARATORS)}), or "
            f"{pattern[:-1]!r} would also grant names that merely start alike, such as "
            f"{pattern[:-1] + 'corp'!r}; write {pattern[:-1] + '-*'!r} for the names under "
            f"{pattern[:-1]!r}, or {pattern[:-1]!r} for that namespace alone"
        )
    return None


def _matches_none(pattern: str) -> str | None:
    """Why no namespace can match `pattern` (a key for it would open nothing), or None.
    Only new keys are held to it: a key file that loaded before still loads."""
    name = pattern if not pattern.endswith("*") or pattern == "*" else pattern[:-1] + "x"
    if name == "*" or is_name(name):
        return None
    return f"{pattern!r} matches no namespace: a name is {NAME_RULE}"


def pattern_allows(pattern: str, namespace: str) -> bool:
    """`*` every namespace, `acme-*` the names under `acme-`, any other the name itself."""
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        prefix = pattern[:-1]
        return len(namespace) > len(prefix) and namespace.startswith(prefix)
    return pattern == namespace


def _allows(patterns: tuple[str, ...], namespace: str) -> bool:
    return any(pattern_allows(p, namespace) for p in patterns)


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
            for pattern in namespaces:
                if problem := pattern_problem(pattern):
                    raise KeyFileError(f"{where} ({name}): {problem}")
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


class Keys(Protocol):
    """What checks a presented key: a fixed `KeyRing`, or the `KeyStore` that follows the file.
    False when no keys are configured (the loopback-only mode)."""

    def __bool__(self) -> bool: ...

    def verify(self, presented: str) -> Principal | None: ...


class KeyStore:
    """The keys file as it is now: looked at again once `ttl_s` passed since the last look, and
    re-read when it changed, so that a key added or revoked counts within seconds without a
    restart.

    The mode is fixed when the gateway starts: with a file configured, a file that later turns
    unreadable or malformed refuses every key (logged with the reason) rather than letting a
    revoked key or anyone in; the next good version of the file is taken up again."""

    def __init__(
        self,
        path: Path,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.ttl_s = ttl_s
        self.clock = clock
        self._ring = KeyRing.load(path)
        self._seen = _stamp(path)
        self._looked = clock()

    def __bool__(self) -> bool:
        return True

    @property
    def keys(self) -> tuple[ApiKey, ...]:
        return self.ring().keys

    def ring(self) -> KeyRing:
        now = self.clock()
        if now - self._looked >= self.ttl_s:
            self._looked = now
            stamp = _stamp(self.path)
            if stamp != self._seen:
                self._seen = stamp
                self._ring = self._reload()
        return self._ring

    def verify(self, presented: str) -> Principal | None:
        return self.ring().verify(presented)

    def _reload(self) -> KeyRing:
        try:
            ring = KeyRing.load(self.path)
        except KeyFileError as exc:
            log.error("gateway.keys_unreadable", error=str(exc), effect="every key is refused")
            return KeyRing()
        log.info("gateway.keys_reloaded", path=str(self.path), keys=len(ring.keys))
        return ring


def open_keys(path: Path | None, ttl_s: float) -> Keys:
    """The keys the gateway checks: the file followed by a `KeyStore`; none without a file."""
    return KeyRing() if path is None else KeyStore(path, ttl_s)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when the file is replaced or rewritten; None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


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
    if not is_name(name):  # what `keys list` prints and `keys revoke` takes: no line breaks
        raise KeyFileError(f"a key's name must be {NAME_RULE} (got {shown(name)})")
    if any(e.get("name") == name for e in entries):
        raise KeyFileError(f"{path}: a key named {name!r} exists; revoke it first")
    if not namespaces:
        raise KeyFileError("a key needs at least one namespace (or '*')")
    for pattern in namespaces:
        placed = bool(pattern) and "*" not in pattern[:-1]  # no star, or one at the end
        if problem := (_matches_none(pattern) if placed else None) or pattern_problem(pattern):
            raise KeyFileError(problem)
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
