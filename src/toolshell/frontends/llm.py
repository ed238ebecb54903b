"""Tool definitions for LLM APIs, and running the model's tool calls, for Python agent builders.

    tools = tool_definitions(host, "anthropic")      # [{"name": "bash", "description", "input_schema"}, …]
    output = await run_tool_call(session, "bash", {"script": "tools --help"})

The model sees `bash` plus the `keep_visible` tools; everything else is behind `tools` in the shell.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from toolshell.command.render import render_result
from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.frontends.bash_tool import BASH_SCHEMA, bash_description
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry
from toolshell.session import Session

Shape = Literal["anthropic", "openai"]


async def visible_tools(host: Host, session: Session | None = None) -> list[ToolEntry]:
    """The `keep_visible` tools; see `Host.visible_tools`."""
    return await host.visible_tools(session)


def _definition(name: str, description: str, schema: dict[str, Any], shape: Shape) -> dict[str, Any]:
    if shape == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


async def tool_definitions(
    host: Host, shape: Shape = "anthropic", session: Session | None = None
) -> list[dict[str, Any]]:
    """`bash` and the `keep_visible` tools in the shape an LLM API takes."""
    servers = (await host.catalog(session)).servers
    defs = [_definition("bash", bash_description(servers), BASH_SCHEMA, shape)]
    defs += [_definition(e.flat_name, e.description, e.input_schema, shape) for e in await visible_tools(host, session)]
    return defs


async def run_tool_call(session: Session, name: str, arguments: dict[str, Any]) -> str:
    """Run one tool call of the model; returns the text to send back as the tool result."""
    if name == "bash":
        script = arguments.get("script")
        if not isinstance(script, str):
            return _error(ToolshellError(ErrorCode.INVALID_INPUT, 'bash takes {"script": "…"}'))
        return json.dumps((await session.run(script)).to_json(), ensure_ascii=False)
    entry = next((e for e in await session.visible_tools() if e.flat_name == name), None)
    if entry is None:
        err = ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no direct tool {name!r}; use bash and `tools --help`")
        return _error(err)
    try:
        result = await session.call_tool(entry.server, entry.name, arguments)
    except ToolshellError as e:
        return _error(e)
    max_bytes = session.services.config.tools_in_shell.max_output_bytes
    rendered = render_result(result, max_bytes=max_bytes, tool=entry.name, output_schema=entry.output_schema)
    if rendered.error is not None:
        return _error(rendered.error)
    return rendered.stdout


def _error(err: ToolshellError) -> str:
    """The tool result text of a failed call: the error line's JSON."""
    return error_line(err).rstrip("\n")
