"""What every gateway route depends on: the caller (its API key), the namespace it may use,
the service.

Every `/v1/namespaces/{namespace}/...` route takes the namespace through one dependency,
`AuthorizedNamespace`, which checks that the caller's key may use the namespace (403);
`EdgeGuard` authenticated the key (401) before the body was read. A route over several namespaces (the
console's overviews) takes the `Caller` and shows only what `Principal.allows`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from schemas.base import Name
from streams.gateway.admission import PRINCIPAL
from streams.gateway.auth import Keys, Principal
from streams.gateway.connection import StackConnection
from streams.gateway.errors import Forbidden, Invalid, Unauthorized
from streams.gateway.service import MemoryService

_bearer = HTTPBearer(auto_error=False, description="an API key as a bearer token")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key")


def caller(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    api_key: Annotated[str | None, Security(_api_key)],
) -> Principal:
    """The caller `EdgeGuard` authenticated before the body was read; the key itself for an
    app without the guard. The security parameters document the two ways to send a key."""
    found = getattr(request.state, PRINCIPAL, None)
    if isinstance(found, Principal):
        return found
    keys: Keys = request.app.state.keys
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


def _calls(dependant: Dependant, call: object) -> bool:
    return dependant.call is call or any(_calls(d, call) for d in dependant.dependencies)


def _query_names(dependant: Dependant) -> set[str]:
    names = {f.alias for f in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def known_query(request: Request, principal: Annotated[Principal, Depends(caller)]) -> None:
    """Refuses a query parameter the route does not read, as an unknown body field is: a
    misspelt `page_sise=5` would be served the default page without a word. A caller the
    route will refuse (another namespace, a stack-wide route) hears that first, from it."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    namespace = request.path_params.get("namespace")
    if namespace is not None and not principal.allows(namespace):
        return
    if not principal.sees_all() and _calls(route.dependant, stack_wide):
        return
    known = _query_names(route.dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        reads = ", ".join(sorted(known)) or "none"
        raise Invalid(
            f"unknown query parameter {unknown[0]!r} (this route reads: {reads})",
            field=unknown[0],
        )


KnownQuery = Depends(known_query)
