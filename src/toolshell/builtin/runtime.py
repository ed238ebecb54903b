"""`runtime`: the `mcp` tool, which lists the configured servers and switches them per session.

Enabling and disabling apply to the calling session only (its `session_id` from the request's
session context). Servers are added in the config file, never from a tool: a tool that could add
a server could make the host run any command.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server import Server

from toolshell.builtin.functions import Function, FunctionCall, ToolResult, function_server
from toolshell.builtin.host import HostHandle
from toolshell.errors import ToolshellError

SERVER = "runtime"
ACTIONS = ("list", "enable", "disable")
# Actions a model may reasonably try that only the config file can do.
_CONFIG_ONLY = frozenset({"add", "remove", "delete", "install", "uninstall", "register", "create", "configure"})

FUNCTIONS = [
    Function(
        name="mcp",
        description=(
            "List the configured MCP servers and their state, or enable/disable one for this session "
            "(with `tool`: show one tool the server's config filter hides). Servers are added only in the config file."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do"},
                "server": {"type": "string", "description": "The server to enable or disable"},
                "tool": {
                    "type": "string",
                    "description": "With enable/disable: one tool of the server that its `tools` filter hides",
                },
            },
            "required": ["action"],
            "additionalProperties": False,
        },
        annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    )
]


class _Runtime:
    def __init__(self, host: HostHandle | None) -> None:
        self.host = host

    async def execute(self, call: FunctionCall) -> ToolResult:
        if call.tool_name != "mcp":
            return ToolResult.error(f"Unknown tool: {call.tool_name}")
        action = call.parameters.get("action")
        if isinstance(action, str) and action.lower() in _CONFIG_ONLY:
            return ToolResult.error(
                f"{action!r} is not possible from a tool: servers are added and removed only in the config file "
                "(a [[mcp.servers]] entry in toolshell.toml); this tool can list, enable and disable them"
            )
        if action not in ACTIONS:
            return ToolResult.error(f"action must be one of list, enable, disable (you sent {action!r})")
        if self.host is None:
            return ToolResult.error("runtime is not attached to a host; it can only run inside toolshell")
        if action == "list":
            return self._list(call)
        return await self._switch(call, enabled=action == "enable")

    def _session_id(self, call: FunctionCall) -> str | None:
        sid = (call.session or {}).get("session_id")
        return sid if isinstance(sid, str) else None

    def _list(self, call: FunctionCall) -> ToolResult:
        assert self.host is not None
        sid = self._session_id(call)
        enabled = self.host.runtime.enabled_for(sid) if sid is not None else {}
        servers = [
            {
                "name": s.name,
                "type": s.type,
                "state": str(s.state),
                "load": s.load,
                "enabled": enabled.get(s.name, True),
                "tool_count": s.tool_count,
                "last_error": s.last_error,
            }
            for s in (self.host.runtime.statuses_for(sid) if sid is not None else [])
        ]
        data = {"servers": servers}
        return ToolResult.success_with_metadata(json.dumps(data, ensure_ascii=False), data)

    async def _switch(self, call: FunctionCall, *, enabled: bool) -> ToolResult:
        assert self.host is not None
        verb = "enable" if enabled else "disable"
        server = call.parameters.get("server")
        if not isinstance(server, str) or not server:
            return ToolResult.error(
                f'server must name a configured server, e.g. {{"action": "{verb}", "server": "git"}}'
            )
        if server == SERVER and not enabled:
            return ToolResult.error("runtime cannot be disabled: it is how this session enables servers again")
        sid = self._session_id(call)
        if sid is None:
            return ToolResult.error(f"{verb} applies to the calling session, and this call carried no session context")
        tool = call.parameters.get("tool")
        try:
            if isinstance(tool, str) and tool:
                await self.host.runtime.set_tool_unlocked(sid, server, tool, enabled)
            else:
                self.host.runtime.set_enabled(sid, server, enabled)
        except ToolshellError as e:
            return ToolResult.error(e.message)
        state = "enabled" if enabled else "disabled"
        if isinstance(tool, str) and tool:
            shown = "shown" if enabled else "hidden again"
            return ToolResult.success_with_metadata(
                f"{server} tool {tool} is {shown} for this session from the next shell call",
                {"server": server, "tool": tool, "enabled": enabled},
            )
        return ToolResult.success_with_metadata(
            f"{server} is now {state} for this session", {"server": server, "enabled": enabled}
        )


def create(host: HostHandle | None = None) -> Server[Any]:
    """The `runtime` server, bound to the host whose servers it lists and switches."""
    return function_server(SERVER, FUNCTIONS, _Runtime(host).execute)
