"""Real MCP hosts the tests drive (installed on demand, never mocked)."""
