"""The `bash` tool's definition is what a client's prompt cache keys on: it stays byte-identical
from one `tools/list` to the next while nothing about the servers changed (shell calls, tool calls,
a runtime switch of one session, another client), and it names each server with its tool count.
When a server's state does change, the definition follows: tests/test_serve_list_changed.py."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host

pytestmark = pytest.mark.anyio
READ = ToolAnnotations(readOnlyHint=True)
CONFIG = Config.model_validate(
    {"mcp": {"servers": [{"name": "octo", "type": "builtin"}, {"name": "solo_desk", "type": "builtin"}]}}
)


def _octo() -> MCPServer:
    server = MCPServer("octo", log_level="WARNING")
    server.add_tool(lambda text: text, name="echo", description="Echo text.", annotations=READ)
    server.add_tool(lambda text: text.upper(), name="shout", description="Shout text.", annotations=READ)
    server.add_tool(lambda text: text.lower(), name="whisper", description="Whisper text.", annotations=READ)
    return server


def _solo() -> MCPServer:
    server = MCPServer("solo", log_level="WARNING")
    server.add_tool(lambda: "ok", name="ping", description="Ping.", annotations=READ)
    return server


async def _bash_definition(client: Client) -> str:
    tools = (await client.list_tools()).tools
    (bash,) = [t for t in tools if t.name == "bash"]
    return bash.model_dump_json()


async def test_the_bash_definition_is_byte_identical_between_lists_while_nothing_changed() -> None:
    scripts = [
        "tools octo echo text=hi",
        "tools --help >/dev/null; tools search shout",
        "tools runtime mcp action=disable server=octo",  # one session's switch: not the servers' state
        "tools solo-desk ping; echo done",
    ]
    async with Host.open(CONFIG, servers={"octo": _octo(), "solo_desk": _solo()}) as host:
        server = build_server(host, [])
        with anyio.fail_after(60):
            async with Client(server) as client:
                first = await _bash_definition(client)
                seen = {first}
                for script in scripts:
                    await client.call_tool("bash", {"script": script})
                    seen.add(await _bash_definition(client))
                    seen.add(await _bash_definition(client))
            async with Client(server) as other:  # another session of the same server
                seen.add(await _bash_definition(other))
    assert seen == {first}


async def test_the_bash_description_names_each_server_with_its_tool_count() -> None:
    async with Host.open(CONFIG, servers={"octo": _octo(), "solo_desk": _solo()}) as host:
        with anyio.fail_after(60):
            async with Client(build_server(host, [])) as client:
                tools = (await client.list_tools()).tools
        description = next(t.description for t in tools if t.name == "bash") or ""
        counts = {s.name.replace("_", "-"): s.tool_count for s in host.statuses()}
    assert counts["octo"] == 3 and counts["solo-desk"] == 1
    for name, count in counts.items():
        line = next(
            (ln for ln in description.splitlines() if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", ln)), None
        )
        assert line is not None, f"{name} is not named in the bash description"
        assert re.search(rf"(?<!\d){count}(?!\d)", line), f"{name}'s line does not give its {count} tools: {line!r}"
