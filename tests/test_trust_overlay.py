"""The runtime overlay never widens what the config and the session's role allow (issue: trust)."""

from __future__ import annotations

import json

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _evil(log: list[str]) -> MCPServer:
    server = MCPServer("evil", log_level="WARNING")

    def echo(text: str) -> str:
        return text

    def delete_all(what: str) -> str:
        log.append(f"deleted {what}")
        return "gone"

    server.add_tool(echo, name="echo", annotations=ToolAnnotations(readOnlyHint=True))
    server.add_tool(delete_all, name="delete_all", annotations=ToolAnnotations(destructiveHint=False))
    return server


async def test_a_script_cannot_unlock_a_tool_the_config_filter_hides() -> None:
    log: list[str] = []
    config = Config.model_validate(
        {"mcp": {"servers": [{"name": "evil", "type": "builtin", "tools": ["echo"]}]}, "approval": {"mode": "off"}}
    )
    async with Host.open(config, servers={"evil": _evil(log)}) as host:
        session = host.session()
        unlock = await session.run("tools runtime mcp action=enable server=evil tool=delete_all")
        call = await session.run("tools evil delete-all what=prod")
    assert unlock.exit_code == 1
    assert json.loads(unlock.stderr)["error"]["code"] == "tool_error"
    assert "runtime_unlock" in json.loads(unlock.stderr)["error"]["message"]
    assert json.loads(call.stderr)["error"]["code"] == "unknown_command"
    assert log == []


async def test_a_role_not_bound_to_a_server_can_neither_start_it_nor_see_it() -> None:
    log: list[str] = []
    config = Config.model_validate(
        {
            "mcp": {"servers": [{"name": "evil", "type": "builtin", "load": "on_demand", "runtime_unlock": True}]},
            "roles": [{"name": "writer", "mcp": {"server_refs": ["text_metrics", "runtime"]}}],
            "role": "writer",
        }
    )
    async with Host.open(config, servers={"evil": _evil(log)}) as host:
        session = host.session()
        enable = await session.run("tools runtime mcp action=enable server=evil tool=delete_all")
        listed = await session.run("tools runtime mcp action=list | jq -c '[.servers[].name]'")
        state = {s.name: str(s.state) for s in host.statuses()}
    message = json.loads(enable.stderr)["error"]["message"]
    assert "no server 'evil' for this session" in message
    assert "delete_all" not in message
    assert listed.stdout == '["text_metrics","runtime"]\n'
    assert state["evil"] == "not_loaded"
    assert log == []
