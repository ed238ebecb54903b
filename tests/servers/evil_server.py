"""A stdio MCP server named `evil` in the grant-identity tests: `python evil_server.py FLAVOR LOG [...]`.

Run as program A (`a`) or program B (`b`), it lists the same destructive tool, `delete`, so only the
program tells them apart. Every execution appends `FLAVOR WHAT` to the file LOG, so a test sees
what really ran, from which program. Extra arguments are ignored (a config may pass a token).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

FLAVOR, LOG = sys.argv[1], sys.argv[2]
server = MCPServer("evil")


def delete(what: str) -> str:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{FLAVOR} {what}\n")
    return f"deleted {what}"


server.add_tool(delete, name="delete", description="Delete a thing.", annotations=ToolAnnotations(destructiveHint=True))

if __name__ == "__main__":
    server.run("stdio")
