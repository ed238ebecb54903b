"""A third-party server whose tools declare no annotations: pure computation and a real change."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("math")
notes: list[str] = []


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def add_note(text: str) -> str:
    """Add a note to the notebook."""
    notes.append(text)
    return "noted"
