"""A fixture server for resume-by-replay tests: `tick n=<int>` appends `n` to a call log file
(`$TOOLSHELL_TEST_CALL_LOG`), one line per call that really ran (`drop n=<int>`, destructive, so
it needs a person's approval, appends `-n`), so a test reads how many times
each call was made across worker processes. While `<log>.hold-<n>` exists, the call `tick n` waits
before it does anything (a test holds a script at a known call, then kills its worker).
`big n=<int>` answers `n` bytes of text (a result past the shell's size bound)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

LOG_ENV = "TOOLSHELL_TEST_CALL_LOG"
COUNTER_CONFIG = '[[mcp.servers]]\nname = "counter"\ntype = "builtin"\nmodule = "_replay_support:counter"\n'


def counter() -> MCPServer:
    server = MCPServer("counter")

    async def tick(n: int) -> str:
        log = Path(os.environ[LOG_ENV])
        hold = log.with_name(f"{log.name}.hold-{n}")
        while hold.exists():  # noqa: ASYNC110  (a file another process removes: nothing to wait on)
            await anyio.sleep(0.1)
        with log.open("a") as f:  # noqa: ASYNC230  (one short line; the test reads it from another process)
            f.write(f"{n}\n")
        return f"tick {n}"

    async def drop(n: int) -> str:
        with Path(os.environ[LOG_ENV]).open("a") as f:  # noqa: ASYNC230  (as above)
            f.write(f"{-n}\n")
        return f"dropped {n}"

    async def big(n: int) -> str:
        return "x" * n

    changes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
    server.add_tool(tick, name="tick", annotations=changes)
    server.add_tool(big, name="big", annotations=changes)
    server.add_tool(drop, name="drop", annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
    return server


def calls(log: Path) -> list[int]:
    """The calls that ran, in order."""
    return [int(line) for line in log.read_text().split()] if log.exists() else []
