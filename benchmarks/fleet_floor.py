"""The floor of `fleet.py`: the raw MCP SDK serving a `bash` tool over Streamable HTTP, no shell.

    python benchmarks/fleet_floor.py --port PORT

`MCPServer` under uvicorn, as the SDK serves any tool: the same wire, the same load and the same
answers as a toolshell worker's (each handle's `log` is a line count kept in memory, the nested
`text-length` is `len("x$i")`), so its CPU per call is what the SDK's HTTP path costs before any
shell, store or `tools` call. The fleet's worker CPU per call is reported as a ratio of it.
"""

from __future__ import annotations

import argparse
import re
import secrets
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("fleet-floor", log_level="WARNING")
lines: dict[str, int] = {}
_STEP = re.compile(r"echo (\d+) >> log")


@server.tool()
def bash(script: str, shell: str = "") -> dict[str, Any]:
    """Run a script (here: count the line it appends to `log`)."""
    handle = shell or "sh_" + secrets.token_urlsafe(32)
    step = _STEP.match(script)
    if step is None:
        return {"exit_code": 2, "success": False, "stdout": "", "stderr": "not the fleet's script", "shell": handle}
    lines[handle] = lines.get(handle, 0) + 1
    stdout = f"{len('x' + step.group(1))}\n{lines[handle]}\n"
    return {"exit_code": 0, "success": True, "stdout": stdout, "stderr": "", "shell": handle}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    server.run("streamable-http", host="127.0.0.1", port=parser.parse_args().port)
