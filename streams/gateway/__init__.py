"""`lychee gateway` (HTTP, with MCP at /mcp) and `lychee mcp` (stdio).

Layout: `service` (what the routes and tools do), `app` (FastAPI routes, auth dependency,
problem responses, the /mcp mount), `mcp` (the tools), `auth` (API keys), `models`
(request and response bodies), `errors`, `server` (binding and serving).
"""
