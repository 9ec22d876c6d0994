"""The MCP server (official SDK, v2 `MCPServer`): memory tools for agents.

Served on stdio by `lychee mcp` (the process talks to Kafka and Redis itself) and over
streamable HTTP at `/mcp` of the gateway (the same API keys as the REST routes). The tools
share the gateway's `MemoryService`; an add returns at once with a receipt. Both servers start
without the stack and connect on the first call that needs it (`streams.gateway.connection`):
until it is up, a call is a tool error naming what is unreachable.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from importlib.metadata import version
from typing import Annotated, Any, TypeVar

import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, ValidationError
from starlette.applications import Starlette

from schemas import Role
from schemas.errors import LycheeError
from schemas.exchange import ControlKind
from schemas.gateway import (
    ControlReceipt,
    ForgetOut,
    HistoryOut,
    NamespaceStatus,
    Receipt,
    RecordsPage,
    SearchIn,
    WaitFor,
)
from schemas.query import TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN
from schemas.records import MemoryType
from streams.gateway.auth import Principal
from streams.gateway.connection import StackConnection
from streams.gateway.errors import GatewayError
from streams.gateway.mcp_arguments import (
    Message,
    SearchResult,
    check_name,
    exchange_in,
    fields,
)
from streams.gateway.service import MemoryService
from streams.settings import Settings

log = structlog.get_logger("lychee.gateway.mcp")
T = TypeVar("T")
DISTRIBUTION = "lychee-memory"  # its name and version are what a host is told

INSTRUCTIONS = (
    "Long-term memory across conversations. Store what the user tells you that may matter "
    "later with add_memory (it returns at once; memory is searchable within seconds), and "
    "call search_memory before answering anything that may depend on earlier conversations."
)

ResolvePrincipal = Callable[[Context[Any, Any]], Principal]
ServiceOf = Callable[[], Awaitable[MemoryService]]


class _Server(MCPServer[Any]):
    """The SDK's server, with a call's arguments that fail its schema named field by field,
    as the REST routes name them, not in the validation library's words; an argument the
    tool does not take is refused, as the REST routes refuse a field they do not know (the
    SDK drops it, and `top_k` for `k` would be a silent default)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            taken = tool.parameters.get("properties", {})
            unknown = [key for key in arguments if key not in taken]
            if unknown:
                raise ToolError(
                    f"{name}: {', '.join(unknown)}: not an argument of this tool "
                    f"(it takes {', '.join(taken)})"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if type(exc) is not ToolError:  # the SDK's UnexpectedToolError: a crash, kept
                raise
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"{name}: {fields(exc.__cause__)}") from exc.__cause__
            if isinstance(exc.__cause__, ToolError):  # ours, which the SDK wraps in its words
                raise ToolError(f"{name}: {exc.__cause__}") from exc.__cause__
            raise


def build_mcp(
    service: ServiceOf,
    principal_of: ResolvePrincipal,
    default_namespace: str | None = None,
    lifespan: Callable[[MCPServer[Any]], contextlib.AbstractAsyncContextManager[Any]] | None = None,
    *,
    confined: bool = False,
) -> MCPServer[Any]:
    """The tools, bound to a service and to how a call's caller is known. `confined`: the
    default namespace is the only one served, as `lychee mcp --namespace` promises its
    operator (no key stands between the agent and the store there to refuse another)."""
    server: MCPServer[Any] = _Server(
        DISTRIBUTION,
        version=version(DISTRIBUTION),
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
    )

    def namespace_of(ctx: Context[Any, Any], namespace: str | None) -> str:
        principal = principal_of(ctx)
        if confined and namespace not in (None, default_namespace):
            raise ToolError(
                f"this MCP server serves namespace {default_namespace!r} only, not {namespace!r}"
            )
        # an empty name is a mistake, not a request for the default
        ns = (
            (default_namespace or principal.default_namespace()) if namespace is None else namespace
        )
        if ns is None:
            raise ToolError("name the namespace: this server has no default namespace")
        check_name("namespace", ns)
        if not principal.allows(ns):
            raise ToolError(f"forbidden: this API key may not use namespace {ns!r}")
        return ns

    _add_tool(server, service, namespace_of)
    _search_tools(server, service, namespace_of)
    _memory_admin_tools(server, service, namespace_of)
    return server


NamespaceOf = Callable[[Context[Any, Any], str | None], str]


def _add_tool(server: MCPServer[Any], service: ServiceOf, namespace_of: NamespaceOf) -> None:
    """Storing what an agent hears, and saying when a conversation is over."""

    @server.tool(
        name="add_memory",
        description=(
            "Store a message or fact in long-term memory. Call it for anything the user says "
            "that may matter in a later conversation: facts about them, preferences, plans, "
            "decisions, events with dates. Pass the user's own words in `content` (or several "
            "turns in `messages`); keep one conversation in one `session_id` so that its "
            "messages are consolidated together. Returns at once with a receipt: memory is "
            "searchable within seconds. To search what you just stored, pass the receipt as "
            "search_memory's `wait_for`. Re-sending the same `exchange_id` stores nothing twice."
        ),
    )
    async def add_memory(
        ctx: Context[Any, Any],
        content: Annotated[
            str | None, Field(description="the text to remember, in the speaker's words")
        ] = None,
        messages: Annotated[
            list[Message] | None,
            Field(description="several turns of one exchange instead of `content`"),
        ] = None,
        role: Annotated[Role, Field(description="who said `content`")] = Role.user,
        speaker: Annotated[str | None, Field(description="the speaker's name, if known")] = None,
        session_id: Annotated[
            str, Field(description="the conversation this belongs to")
        ] = "default",
        exchange_id: Annotated[
            str | None, Field(description="your id for this message, to make re-sends safe")
        ] = None,
        session_date: Annotated[
            datetime | None,
            Field(description="when the conversation took place (ISO 8601); default: now"),
        ] = None,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> Receipt:
        # without a date the service dates it when it accepts it, as it does a REST add
        ex = exchange_in(content, messages, role, speaker, session_id, exchange_id, session_date)
        ns = namespace_of(ctx, namespace)
        return await _call(service, lambda svc: svc.add(ns, [ex]))

    @server.tool(
        name="end_conversation",
        description=(
            "Tell memory that a conversation is over. What was said in it is consolidated "
            "into memory records (facts, preferences, plans...) now, instead of after the "
            "conversation has been idle for a while (30 minutes by default); its messages are "
            "searchable either way. Call it when the user says goodbye or the task is done. "
            "A later message in the same `session_id` starts the conversation again."
        ),
    )
    async def end_conversation(
        ctx: Context[Any, Any],
        session_id: Annotated[str, Field(description="the conversation that ended")] = "default",
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> ControlReceipt:
        ns = namespace_of(ctx, namespace)
        check_name("session_id", session_id)
        kind = ControlKind.end_session
        return await _call(service, lambda svc: svc.control(kind, ns, session_id, None))


def _search_tools(server: MCPServer[Any], service: ServiceOf, namespace_of: NamespaceOf) -> None:
    """Searching memory and asking whether what was stored is searchable yet."""

    @server.tool(
        name="search_memory",
        description=(
            "Search long-term memory. Call it before answering anything that may depend on "
            "earlier conversations: what the user told you about themselves, their "
            "preferences, plans, people, dates, or what was said or decided before. Ask a "
            "specific question in natural language (e.g. 'Where does the user work?', 'What "
            "did we decide about the trip in May?'). Returns the best memories with their "
            "dates and sources; an empty list means nothing relevant is stored (with "
            "`token_budget`: or that every memory found takes more than the budget)."
        ),
    )
    async def search_memory(
        ctx: Context[Any, Any],
        query: Annotated[str, Field(description="what to look for, as a question")],
        k: Annotated[int, Field(ge=1, le=50, description="how many memories")] = 10,
        session_id: Annotated[
            str | None, Field(description="only this conversation (default: all)")
        ] = None,
        token_budget: Annotated[
            int | None,
            Field(
                ge=TOKEN_BUDGET_MIN,
                le=TOKEN_BUDGET_MAX,
                description="the most prompt tokens the memories may take: the best ones "
                "that fit, in order (default: no limit but k)",
            ),
        ] = None,
        wait_for: Annotated[
            dict[str, Any] | None,
            Field(description="a receipt from add_memory: wait until it is searchable"),
        ] = None,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> SearchResult:
        try:
            req = SearchIn(
                query=query,
                k=k,
                session_id=session_id,
                token_budget=token_budget,
                wait_for=WaitFor.model_validate(wait_for) if wait_for is not None else None,
            )
        except ValidationError as exc:
            raise ToolError(fields(exc)) from exc
        ns = namespace_of(ctx, namespace)
        reply = await _call(service, lambda svc: svc.search(ns, req))
        return SearchResult.of(query, reply.evidence)

    @server.tool(
        name="get_status",
        description=(
            "Whether what was stored is searchable yet: per conversation (session), the last "
            "message accepted, segmented and indexed. Use it when a search does not find "
            "something you just stored, or to confirm a large import finished."
        ),
    )
    async def get_status(
        ctx: Context[Any, Any],
        session_id: Annotated[str | None, Field(description="one conversation only")] = None,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> NamespaceStatus:
        ns = namespace_of(ctx, namespace)
        if session_id is not None:
            check_name("session_id", session_id)
        return await _call(service, lambda svc: svc.status(ns, session_id))


def _memory_admin_tools(
    server: MCPServer[Any], service: ServiceOf, namespace_of: NamespaceOf
) -> None:
    """Listing and deleting what is remembered."""

    @server.tool(
        name="list_memories",
        description=(
            "List what is remembered about the user, oldest first, a page at a time: the "
            "memory records (facts, preferences, events...) or, with `turns`, the raw "
            "messages. Use it when the user asks what you know or keep about them."
        ),
    )
    async def list_memories(
        ctx: Context[Any, Any],
        session_id: Annotated[str | None, Field(description="one conversation only")] = None,
        memory_type: Annotated[
            MemoryType | None, Field(description="one kind of memory only")
        ] = None,
        turns: Annotated[bool, Field(description="raw messages instead of records")] = False,
        page: Annotated[int, Field(ge=1)] = 1,
        page_size: Annotated[int, Field(ge=1, le=200)] = 50,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> RecordsPage:
        ns = namespace_of(ctx, namespace)
        if session_id is not None:
            check_name("session_id", session_id)
        kind = memory_type.value if memory_type else None
        return await _call(
            service, lambda svc: svc.records(ns, session_id, kind, None, turns, page, page_size)
        )

    @server.tool(
        name="memory_history",
        description=(
            "What changed in memory: which statement replaced which (the old value, the new "
            "one, when, from which messages) and the statements that contradict each other "
            "with nothing later settling them. Use it when the user asks how something "
            "changed or what they said before, or to ask them about a contradiction."
        ),
    )
    async def memory_history(
        ctx: Context[Any, Any],
        record_id: Annotated[
            str | None, Field(max_length=200, description="one record's history only")
        ] = None,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> HistoryOut:
        ns = namespace_of(ctx, namespace)
        return await _call(service, lambda svc: svc.history(ns, record_id))

    @server.tool(
        name="delete_all_memories",
        description=(
            "Permanently forget everything remembered about the user (or one conversation "
            "with `session_id`), in every store, and return a receipt of what was removed. "
            "Only call it when the user explicitly asks to delete their memory; pass the "
            "namespace being deleted again in `confirm`. It cannot be undone."
        ),
    )
    async def delete_all_memories(
        ctx: Context[Any, Any],
        confirm: Annotated[str, Field(description="the namespace to delete, repeated to confirm")],
        session_id: Annotated[
            str | None, Field(description="only this conversation (default: everything)")
        ] = None,
        namespace: Annotated[
            str | None, Field(description="whose memory; default: the server's")
        ] = None,
    ) -> ForgetOut:
        ns = namespace_of(ctx, namespace)
        if confirm != ns:
            raise ToolError(f"not deleted: `confirm` must be the namespace {ns!r}")
        if session_id is not None:
            check_name("session_id", session_id)
        return await _call(service, lambda svc: svc.forget(ns, session_id))


async def _call(service: ServiceOf, use: Callable[[MemoryService], Awaitable[T]]) -> T:
    """A tool's work on the connected service; any error of ours as one line."""
    try:
        return await use(await service())
    except GatewayError as exc:
        raise ToolError(f"{exc.title}: {exc.detail}") from exc
    except LycheeError as exc:  # the store, Kafka or Redis as the service met them
        raise ToolError(str(exc)) from exc
    except ValidationError as exc:  # a model built from the arguments: its fields named
        raise ToolError(fields(exc)) from exc
    except (ToolError, ValueError):  # the caller's arguments, named by who raised it
        raise
    except Exception as exc:  # noqa: BLE001 - named as the REST routes' 500 names it
        log.error("mcp.unhandled", error=repr(exc))
        raise ToolError(f"Internal error: {type(exc).__name__}") from exc


def http_app(server: MCPServer[Any], max_body_bytes: int) -> Starlette:
    """The tools over streamable HTTP at `/mcp`, behind the gateway's `EdgeGuard`, which
    applies the REST routes' rules to it: a key with keys configured; without keys a loopback
    Host and the gateway's own Origin for a write (DNS rebinding, other sites); the body
    limit. The SDK's own Host/Origin allow-list is off, as it would refuse a reverse proxy's
    Host that a key already vouches for, and its body limit is the gateway's."""
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,  # any replica can serve any call: nothing to pin
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body_bytes,
    )


def request_principal(ctx: Context[Any, Any]) -> Principal:
    """The caller of an HTTP request, as the gateway's `/mcp` authentication left it."""
    request = ctx.request_context.request
    principal = getattr(getattr(request, "state", None), "lychee_principal", None)
    if not isinstance(principal, Principal):
        raise ToolError("unauthenticated")
    return principal


def run_stdio(settings: Settings, namespace: str | None) -> None:
    """`lychee mcp`: the tools on stdin/stdout for a local MCP host (no keys: the host's user
    runs this process with the stack's credentials already). A namespace the operator gives
    (`--namespace` or LYCHEE_MCP_NAMESPACE) is the only one served, so that an agent told
    otherwise by what it reads cannot reach another user's memory; without one, a tool
    argument names any namespace of the store."""
    stack = StackConnection(settings)
    served = namespace or settings.gateway.mcp_namespace

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        async with stack:
            yield {}

    server = build_mcp(
        stack.service, lambda _: Principal.local(), served, lifespan, confined=served is not None
    )
    server.run("stdio")
