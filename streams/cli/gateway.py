"""`lychee gateway` (and its API keys) and `lychee mcp`."""

from __future__ import annotations

from pathlib import Path

import click

from streams.cli.common import PORT, printable, served_settings, settings


@click.group(invoke_without_command=True)
@click.option("--host", default=None, help="address to listen on (default LYCHEE_GATEWAY_HOST)")
@click.option("--port", type=PORT, default=None, help="0 picks a free port (LYCHEE_GATEWAY_PORT)")
@click.pass_context
def gateway(ctx: click.Context, host: str | None, port: int | None) -> None:
    """The HTTP gateway (REST, MCP at /mcp, /metrics, OpenAPI at /docs)."""
    if ctx.invoked_subcommand is not None:
        return
    from streams.gateway.auth import open_keys
    from streams.gateway.errors import GatewayConfigError, KeyFileError
    from streams.gateway.server import bind, check_binding, serve

    s = served_settings()
    s = s.replaced(
        gateway={
            "host": host or s.gateway.host,
            "port": s.gateway.port if port is None else port,
        }
    )
    try:
        keys = open_keys(s.gateway.api_keys_file, s.gateway.keys_ttl_s)
        warning = check_binding(s.gateway.host, keys)
        sock = bind(s.gateway.host, s.gateway.port)
    except (KeyFileError, GatewayConfigError) as exc:
        raise click.ClickException(str(exc)) from exc
    if warning:
        click.echo(f"warning: {warning}", err=True)
    h, p = sock.getsockname()[:2]
    click.echo(
        f"lychee gateway on http://{h}:{p} (console at /, OpenAPI at /docs, MCP at /mcp, "
        "metrics at /metrics)" + (f"; API keys of {s.gateway.api_keys_file}" if keys else ""),
        err=True,
    )
    serve(s, sock, keys)


@gateway.group("keys")
def gateway_keys() -> None:
    """API keys of LYCHEE_API_KEYS_FILE (stored as SHA-256 digests)."""


def _keys_file(path: Path | None) -> Path:
    found = path or settings().gateway.api_keys_file
    if found is None:
        raise click.ClickException("set LYCHEE_API_KEYS_FILE or pass --file")
    return found


_FILE = click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the keys file (default LYCHEE_API_KEYS_FILE)",
)


@gateway_keys.command("add")
@click.argument("name")
@click.option(
    "--namespace",
    "-n",
    "namespaces",
    multiple=True,
    required=True,
    help="a namespace (acme), the names under a prefix ending in a separator and * (acme-*), "
    "or * for all (repeatable)",
)
@_FILE
def keys_add(name: str, namespaces: tuple[str, ...], path: Path | None) -> None:
    """Create a key for NAME; prints it once (only its digest is stored)."""
    from streams.gateway.auth import add_key
    from streams.gateway.errors import KeyFileError

    file = _keys_file(path)
    try:
        key = add_key(file, name, list(namespaces))
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(key)
    click.echo(
        f"stored the digest of {name}'s key in {file}; a running gateway takes it up within "
        "LYCHEE_GATEWAY_KEYS_TTL_S",
        err=True,
    )


@gateway_keys.command("list")
@_FILE
def keys_list(path: Path | None) -> None:
    """Names and namespaces of the keys (never the keys)."""
    from streams.gateway.auth import list_keys
    from streams.gateway.errors import KeyFileError

    try:
        for entry in list_keys(_keys_file(path)):
            line = f"{entry['name']}: {', '.join(entry['namespaces'] or [])}"
            click.echo(printable(line))  # a name written into the file by hand, too
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc


@gateway_keys.command("revoke")
@click.argument("name")
@_FILE
def keys_revoke(name: str, path: Path | None) -> None:
    """Remove NAME's key (a running gateway refuses it within LYCHEE_GATEWAY_KEYS_TTL_S)."""
    from streams.gateway.auth import revoke_key
    from streams.gateway.errors import KeyFileError

    try:
        revoke_key(_keys_file(path), name)
    except KeyFileError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"revoked {name}", err=True)


@click.command()
@click.option(
    "--namespace",
    default=None,
    help="the only namespace served (also LYCHEE_MCP_NAMESPACE); unset: every namespace",
)
def mcp(namespace: str | None) -> None:
    """The MCP server on stdio, for an MCP host: it talks to Kafka, Redis and the store
    directly, those of the running `lychee up` when no LYCHEE_* connection variable is set.

    With --namespace NS (or LYCHEE_MCP_NAMESPACE) it serves NS only: a tool call naming
    another namespace is an error. Without one, each tool call names its namespace, and the
    agent may read, write and forget every namespace of the store."""
    from streams.gateway.mcp import run_stdio

    run_stdio(served_settings(), namespace)
