"""What every gateway route depends on: the caller (its API key), the namespace it may use,
the service.

Every `/v1/namespaces/{namespace}/...` route takes the namespace through one dependency,
`AuthorizedNamespace`, which authenticates the API key (401) and checks that the key may use
the namespace (403) before the body is even read. A route over several namespaces (the
console's overviews) takes the `Caller` and shows only what `Principal.allows`.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from schemas.base import Name
from streams.gateway.auth import KeyRing, Principal
from streams.gateway.connection import StackConnection
from streams.gateway.errors import Forbidden, Unauthorized, UnsupportedMediaType
from streams.gateway.service import MemoryService

_bearer = HTTPBearer(auto_error=False, description="an API key as a bearer token")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key")


def caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    api_key: Annotated[str | None, Security(_api_key)],
) -> Principal:
    keys: KeyRing = request.app.state.keys
    if not keys:
        return Principal.local()
    presented = bearer.credentials if bearer else api_key
    principal = keys.verify(presented) if presented else None
    if principal is None:
        raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")
    return principal


def authorized_namespace(
    namespace: Annotated[Name, Path(description="the memory space (a user, an agent-user pair)")],
    principal: Annotated[Principal, Depends(caller)],
) -> str:
    if not principal.allows(namespace):
        raise Forbidden(f"this API key may not use namespace {namespace!r}", field="namespace")
    return namespace


AuthorizedNamespace = Annotated[str, Depends(authorized_namespace)]
SessionId = Annotated[Name, Path(description="the session (one conversation)")]


async def service_of(request: Request) -> MemoryService:
    """The connected service; 503 naming what is unreachable while the stack is down."""
    stack: StackConnection = request.app.state.stack
    return await stack.service()


Service = Annotated[MemoryService, Depends(service_of)]

Caller = Annotated[Principal, Depends(caller)]


def stack_wide(principal: Caller) -> Principal:
    """A caller allowed every namespace: what mixes them (dead letters) is for it only."""
    if not principal.sees_all():
        raise Forbidden("this mixes every namespace's text: it needs a key for every namespace (*)")
    return principal


StackWide = Annotated[Principal, Depends(stack_wide)]


def same_origin_json(request: Request) -> None:
    """A write the console makes, refused when another site could have made the browser send it.

    A page elsewhere can submit a form (urlencoded, multipart, text/plain) or a no-cors fetch
    or beacon to the gateway with no CORS preflight; a JSON body needs a preflight, which the
    gateway never grants: so JSON only, always. Without keys nothing else tells who calls, so
    also the `Origin`, which browsers send with every POST, must be this very host (a client
    that sends none is not a browser); the `Host` is a loopback name (`EdgeGuard` refuses
    any other without keys, a DNS-rebound one included).
    """
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(f"send the body as application/json (got {media or 'none'!r})")
    keys: KeyRing = request.app.state.keys
    if keys:
        return  # the key, which another site cannot read nor send, is the proof
    host = request.headers.get("host", "")  # a loopback name: `EdgeGuard` checked
    origin = request.headers.get("origin")
    if origin is not None and _netloc(origin) != host.lower():
        raise Forbidden(
            f"a request from {origin!r} is refused: only the gateway's own pages "
            "may write without an API key"
        )


SameOriginJson = Annotated[None, Depends(same_origin_json)]


def _netloc(origin: str) -> str | None:
    try:
        return urlsplit(origin).netloc.lower()
    except ValueError:
        return None
