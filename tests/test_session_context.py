"""Seed 001's session context details and the runtime overlay: `shell` per server, `context_epoch`,
and `runtime mcp enable tool=…` showing one tool that the server's `tools` filter hides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations

from _connections_support import serve_http
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio
READ = ToolAnnotations(readOnlyHint=True)


def _octofs() -> MCPServer:
    """A server with a `shell` tool whose `whoami` reports the session context it was sent."""
    server = MCPServer("octofs", log_level="WARNING")

    async def whoami(ctx: Context) -> dict[str, Any]:
        meta = ctx.request_context.meta or {}
        session = meta.get("io.toolshell/session", {})
        return {"shell": session.get("shell"), "context_epoch": session.get("context_epoch")}

    server.add_tool(whoami, name="whoami", description="Report the session context.", annotations=READ)
    server.add_tool(lambda: "ran", name="shell", description="Run a command.", annotations=READ)
    server.add_tool(lambda: "secret", name="hidden", description="Hidden by the filter.", annotations=READ)
    return server


def _config(tools: list[str], runtime_unlock: bool = False) -> Config:
    server = {"name": "octofs", "type": "builtin", "tools": tools, "runtime_unlock": runtime_unlock}
    return Config.model_validate({"mcp": {"servers": [server]}})


async def test_shell_in_the_context_says_whether_the_session_may_call_the_servers_shell_tool() -> None:
    async with Host.open(_config([]), servers={"octofs": _octofs()}) as host:
        allowed = await host.run("tools octofs whoami | jq -c .shell")
    async with Host.open(_config(["whoami"]), servers={"octofs": _octofs()}) as host:
        filtered = await host.run("tools octofs whoami | jq -c .shell")
    assert (allowed.stdout, filtered.stdout) == ("true\n", "false\n")


async def test_context_epoch_changes_when_the_model_loses_results_and_never_repeats() -> None:
    async with Host.open(_config([]), servers={"octofs": _octofs()}) as host:
        session = host.session()
        seen = [json.loads((await session.run("tools octofs whoami")).stdout)["context_epoch"]]
        for _ in range(2):
            session.new_context_epoch()
            seen.append(json.loads((await session.run("tools octofs whoami")).stdout)["context_epoch"])
    assert seen == [0, 1, 2]


async def test_the_runtime_overlay_shows_one_hidden_tool_for_the_calling_session_only() -> None:
    async with Host.open(_config(["whoami"], runtime_unlock=True), servers={"octofs": _octofs()}) as host:
        session = host.session()
        before = await session.run("tools octofs hidden 2>&1 | jq -r .error.code")
        shown = await session.run("tools runtime mcp action=enable server=octofs tool=hidden")
        after = await session.run("tools octofs hidden")
        other = await host.session().run("tools octofs hidden 2>&1 | jq -r .error.code")
        unknown = await session.run("tools runtime mcp action=enable server=octofs tool=nope")
        await session.run("tools runtime mcp action=disable server=octofs tool=hidden")
        hidden_again = await session.run("tools octofs hidden 2>&1 | jq -r .error.code")
    assert before.stdout == "unknown_command\n"
    assert shown.stdout == "octofs tool hidden is shown for this session from the next shell call\n", shown.stderr
    assert after.stdout == "secret\n"
    assert other.stdout == "unknown_command\n"
    assert "has no tool 'nope'" in json.loads(unknown.stderr)["error"]["message"]
    assert hidden_again.stdout == "unknown_command\n"


async def test_tools_help_counts_the_tools_the_filter_leaves() -> None:
    async with Host.open(_config(["whoami"]), servers={"octofs": _octofs()}) as host:
        result = await host.run("tools --help | grep octofs")
    assert result.stdout == "  octofs        1 tool\n"


def _reporter() -> MCPServer:
    """An HTTP server whose `where` reports the working directory the session context named."""
    server = MCPServer("reporter", log_level="WARNING")

    async def where(ctx: Context) -> str:
        session = (ctx.request_context.meta or {}).get("io.toolshell/session", {})
        return json.dumps({"workdir": session.get("workdir"), "project": session.get("project")})

    server.add_tool(where, name="where", description="Report the workdir.", annotations=READ)
    return server


async def test_the_hosts_working_directory_goes_only_to_local_servers_unless_a_server_is_configured_to_get_it(
    tmp_path: Path,
) -> None:
    """`0.0.0.0` reaches the test's server on this machine but is not a loopback address: it stands
    for a server elsewhere (what the URL names is judged, not where it happens to lead)."""
    # The server itself takes requests for the address it is reached at (Host `0.0.0.0:<port>`).
    security = TransportSecuritySettings(allowed_hosts=["127.0.0.1:*", "0.0.0.0:*"])
    async with serve_http(_reporter().streamable_http_app(transport_security=security)) as url:
        elsewhere = url.replace("127.0.0.1", "0.0.0.0")
        servers = [
            {"name": "local", "type": "http", "url": url},
            {"name": "remote", "type": "http", "url": elsewhere},
            {"name": "told", "type": "http", "url": elsewhere, "send_workdir": True},
            {"name": "withheld", "type": "http", "url": url, "send_workdir": False},
        ]
        config = Config.model_validate({"mcp": {"servers": servers}})
        async with Host.open(config, state_dir=tmp_path / "state") as host:
            session = host.session(workdir=str(tmp_path))
            seen = {
                name: json.loads((await session.run(f"tools {name} where")).stdout)
                for name in ("local", "remote", "told", "withheld")
            }
    assert {name: s["workdir"] for name, s in seen.items()} == {
        "local": str(tmp_path),
        "remote": "",
        "told": str(tmp_path),
        "withheld": "",
    }
    assert len({s["project"] for s in seen.values()}) == 1, "the project id (a hash) still goes to every server"
