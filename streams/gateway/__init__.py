"""`lychee gateway` (HTTP, with MCP at /mcp and the console at /) and `lychee mcp` (stdio).

Layout: `service` (what the routes and tools do), `app` (FastAPI routes, problem responses,
the /mcp mount), `deps` (the caller, its namespaces, the service: what every route depends
on), `views` and `browse` (the read routes over namespaces, sessions, timelines and
operations, and the service code behind them), `console` (the console's static files and
their security headers), `mcp` (the tools), `auth` (API keys), `models` (request and response
bodies), `errors`, `server` (binding and serving).
"""
