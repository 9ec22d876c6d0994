"""What a request to /v1 or /mcp must show before the gateway reads its body or gives it a
slot, judged on its headers alone: a valid key (with keys configured), a body typed as JSON,
a declared length within the limit, and, without keys, an origin that is the gateway's own
for anything that changes state.

Why before the body: FastAPI reads and parses a body before any dependency runs, so a key
checked by a dependency lets anyone make the gateway parse megabytes; and a request that
waits for its body holds a slot. `EdgeGuard` applies these rules and answers the refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from schemas.base import shown
from streams.gateway.auth import Keys, Principal, presented_key

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PRINCIPAL = "lychee_principal"  # where the caller is left in the ASGI scope's state


@dataclass(frozen=True)
class Refusal:
    """A problem to answer instead of serving the request."""

    status: int
    title: str
    detail: str
    headers: dict[str, str] = field(default_factory=dict)


class Headers:
    """A request's headers by lower-case name (the last of a repeated one)."""

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self.values = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}

    def get(self, name: str) -> str | None:
        return self.values.get(name)


def authenticate(headers: Headers, keys: Keys) -> Principal | Refusal:
    """The caller: local without keys, else the presented key's principal or a 401."""
    if not keys:
        return Principal.local()
    key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
    principal = keys.verify(key) if key else None
    if principal is None:
        return Refusal(
            401,
            "Unauthorized",
            "a valid API key is required (Authorization: Bearer <key> or X-API-Key: <key>)",
            {"www-authenticate": "Bearer"},
        )
    return principal


def body_problem(headers: Headers, limit: int) -> Refusal | None:
    """A body that is not JSON or not sent as it is (415), or declares a length over
    `limit` (413).

    A page elsewhere can make a browser send a form (urlencoded, multipart, text/plain), a
    no-cors fetch or a beacon without a CORS preflight; a JSON body needs a preflight, which
    the gateway never grants. So every body is JSON, with keys or without."""
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        return Refusal(413, "Request too large", f"the body is over {limit} bytes")
    has_body = headers.get("transfer-encoding") is not None or (length or "0") != "0"
    media = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if has_body and media != "application/json":
        return Refusal(
            415,
            "Unsupported media type",
            f"send the body as application/json (got {media or 'none'!r})",
        )
    coding = (headers.get("content-encoding") or "identity").strip().lower()
    if has_body and coding != "identity":
        return Refusal(
            415,
            "Unsupported media type",
            f"send the body uncompressed: Content-Encoding {shown(coding)} is not read",
        )
    return None


def cross_site(headers: Headers, method: str, every_method: bool = False) -> Refusal | None:
    """Without keys, a state-changing request that a page of another origin made (403);
    with `every_method`, a read too (`/mcp`: its GET opens an event stream that holds a slot
    for as long as it is open, which another site's `EventSource` must not).

    Nothing else tells who calls: the `Origin`, which browsers send with every such request,
    must be this very host (the `Host` is a loopback name: `EdgeGuard` refuses any other
    without keys, a DNS-rebound one included); without an `Origin`, the `Referer` if there is
    one. A client that sends neither is not a browser."""
    if method.upper() in SAFE_METHODS and not every_method:
        return None
    host = (headers.get("host") or "").lower()
    origin = headers.get("origin")
    sender = origin if origin is not None else headers.get("referer")
    if sender is None or _netloc(sender) == host:
        return None
    return Refusal(
        403,
        "Forbidden",
        f"a request from {sender!r} is refused: without API keys only the gateway's own "
        "pages may change what it holds",
    )


def _netloc(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.netloc.lower() if parts.scheme in ("http", "https") else None
