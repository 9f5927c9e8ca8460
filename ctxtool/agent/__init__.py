"""For a live agent loop: the per-turn transform, AGENTS.md instructions, the cache as tools (and MCP)."""
