"""`lychee gateway` (HTTP, with MCP at /mcp and the console at /) and `lychee mcp` (stdio).

Layout: `service` (what the routes and tools do), `app` (the factory that puts the rest
together), `routes` (the REST routes of one namespace), `problems` (problem details for
every error), `middleware` (the ASGI layers: `EdgeGuard` outermost, the /mcp
authentication), `deps` (the caller, its namespaces, the service: what every route depends
on), `views` and `browse` (the read routes over namespaces, sessions, timelines and
operations, and the service code behind them), `dead_letters` (their routes), `console` (the
console's static files and their security headers), `mcp` (the tools), `auth` (API keys),
`errors`, `connection` (the stack, connected on first use), `server` (binding and serving).
The request and response bodies are `schemas.gateway`, the contract `lychee_client` shares.
"""
