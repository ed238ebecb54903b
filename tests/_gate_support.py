"""A server whose `wait` tool holds its call (and so its shell) until the test opens it."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


class Gate:
    """`gate wait`: sets `entered`, then waits (bounded) until the test sets `open`."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.open = anyio.Event()

    def server(self) -> MCPServer:
        server = MCPServer("gate")

        async def wait() -> str:
            self.entered.set()
            with anyio.fail_after(60):
                await self.open.wait()
            return "opened"

        server.add_tool(
            wait,
            name="wait",
            description="Wait.",
            structured_output=False,
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        return server
