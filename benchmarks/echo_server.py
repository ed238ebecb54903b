"""The benchmark's echo server: one read-only tool, `echo(text) -> str`, served over stdio.

Both benchmark modes start this same file as a subprocess, so any difference in their timings is
the client side: the raw SDK `Client` versus toolshell's whole `tools` call path.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("echo", log_level="WARNING")


# readOnlyHint: policy never asks before a read-only call, so approvals stay out of the measurement.
@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
