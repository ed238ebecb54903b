"""`key=@path` end to end: a file of the shell reaches the tool byte for byte."""

from __future__ import annotations

import json

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _store(kept: list[str]) -> MCPServer:
    server = MCPServer("store", log_level="WARNING")

    def put(content: str) -> str:
        kept.append(content)
        return f"{len(content)} characters"

    server.add_tool(put, name="put", annotations=ToolAnnotations(destructiveHint=False, openWorldHint=False))
    return server


async def test_a_file_value_keeps_the_trailing_newlines_that_a_substitution_drops() -> None:
    kept: list[str] = []
    script = (
        "mkdir -p notes && cd notes && printf 'a\\nb\\n\\n' > n.txt\n"
        'tools store put content=@n.txt\ntools store put content="$(cat n.txt)"\n'
        "tools store put 'content=\\@n.txt'\n"
    )
    async with Host.open(Config(), servers={"store": _store(kept)}) as host:
        result = await host.run(script)
    assert result.exit_code == 0, result.stderr
    assert kept == ["a\nb\n\n", "a\nb", "@n.txt"]


async def test_a_missing_file_is_invalid_input_and_nothing_is_sent() -> None:
    kept: list[str] = []
    async with Host.open(Config(), servers={"store": _store(kept)}) as host:
        result = await host.run("tools store put content=@gone.txt")
    error = json.loads(result.stderr)["error"]
    assert (error["code"], kept) == ("invalid_input", [])
    assert "content=@gone.txt reads a file of the shell, but it cannot be read" in error["message"]


async def test_the_plan_leaves_a_file_value_to_run_time() -> None:
    async with Host.open(Config(), servers={"store": _store([])}) as host:
        result = await host.run("tools plan <<'EOF'\ntools store put content=@n.txt\nEOF")
    (call,) = json.loads(result.stdout)["calls"]
    assert (call["input"], call["risk"]) == (None, "checked_at_run_time")
