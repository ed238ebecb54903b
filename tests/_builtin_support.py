"""A user's own built-in servers, for `resolve_builtin(name, module="_builtin_support:…")` tests."""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from toolshell.builtin.functions import Function, FunctionCall, ToolResult, function_server

mcp_server = MCPServer("greeter")


@mcp_server.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"hello {name}"


hosts_seen: list[Any] = []


async def _echo(call: FunctionCall) -> ToolResult:
    return ToolResult.success(call.parameters.get("text", ""))


def make_server(host: Any) -> Server[Any]:
    """A factory taking the host handle."""
    hosts_seen.append(host)
    return function_server("echo", [Function("echo", "Echo text.", {"type": "object"})], _echo)


def make_plain() -> Server[Any]:
    """A factory taking nothing."""
    return function_server("plain", [], _echo)


def make_wrong(host: Any) -> str:
    return "not a server"


def make_broken(host: Any) -> Server[Any]:
    raise RuntimeError("no token configured")


not_a_server = 42
