"""Servers for the person-in-the-loop tests: one that asks with the older `ctx.elicit` / `elicit_url`
(needs `protocol = "2025-11-25"`), one with the resolver-style `Elicit`, and the github stand-in.

Importable by `module = "_loop_servers:…"` in a config when `tests` is on PYTHONPATH.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from _github_server import make_github

READ = ToolAnnotations(readOnlyHint=True)


class Name(BaseModel):
    name: str


def old_greeter() -> MCPServer:
    """Asks with `ctx.elicit` (and `ctx.elicit_url`), which the SDK allows only before 2026-07-28."""
    server = MCPServer("old-greeter", log_level="WARNING")

    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("What is your name?", Name)
        return f"hello {answer.data.name}" if answer.action == "accept" else f"no answer ({answer.action})"

    async def sign_in(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to continue", "https://example.test/login", "login-1")
        return f"sign-in: {answer.action}"

    server.add_tool(greet, name="greet", description="Greet the person.", annotations=READ)
    server.add_tool(sign_in, name="sign-in", description="Sign in through a web page.", annotations=READ)
    return server


def _ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def new_greeter() -> MCPServer:
    """Asks with the resolver-style `Elicit`: an input_required round on 2026-07-28."""
    server = MCPServer("new-greeter", log_level="WARNING")

    async def greet(answer: Annotated[ElicitationResult[Name], Resolve(_ask_name)]) -> str:
        return f"hello {answer.data.name}" if answer.action == "accept" else f"no answer ({answer.action})"

    server.add_tool(greet, name="greet", description="Greet the person.", annotations=READ)
    return server


def github() -> MCPServer:
    return make_github()
