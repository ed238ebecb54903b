"""Tool definitions for LLM APIs, and running the model's tool calls, for Python agent builders.

    tools = tool_definitions(host, "anthropic")      # [{"name": "bash", "description", "input_schema"}, …]
    output = await run_tool_call(session, "bash", {"script": "tools --help"})
    output = await run_tool_call(Shells.for_host(host), "bash", {"script": "…", "shell": "sh_…"})

With a `Session`, every `bash` call runs in that session's shell. With `Shells`, a call runs in the
shell its `shell` argument names (a new one without it) and the output names the shell
(`[shell sh_…]`), so the model keeps its shell by passing it back: the same handles `toolshell serve` gives out.

The model sees `bash` plus the `keep_visible` tools; everything else is behind `tools` in the shell.
"""

from __future__ import annotations

from typing import Any, Literal

from toolshell.command.render import render_result
from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.frontends.serve.bash_tool import BASH_SCHEMA, bash_description, bash_text
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry
from toolshell.registry.masked import masked_catalog, masked_entry
from toolshell.session import Session
from toolshell.shells import Shells

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
    catalog = await host.catalog(session)
    defs = [_definition("bash", bash_description(*masked_catalog(catalog, host.redact)), BASH_SCHEMA, shape)]
    for e in await visible_tools(host, session):  # named by the config; what the server wrote, masked
        shown = masked_entry(e, host.redact)
        defs.append(_definition(e.flat_name, shown.description, shown.input_schema, shape))
    return defs


async def run_tool_call(
    target: Session | Shells, name: str, arguments: dict[str, Any], *, caller: str | None = None
) -> str:
    """Run one tool call of the model in a session, or in the shells by handle; returns the text to
    send back as the tool result (for `bash`: stdout, then what is not the default, `bash_text`;
    with `Shells` it names the shell). `caller` is whose shells they are (with `Shells`)."""
    if name == "bash":
        script, shell = arguments.get("script"), arguments.get("shell")
        if not isinstance(script, str) or not isinstance(shell, str | None):
            return _error(ToolshellError(ErrorCode.INVALID_INPUT, 'bash takes {"script": "…", "shell": "sh_…"}'))
        if isinstance(target, Shells):  # the model keeps its shell by the handle the text names
            return bash_text((await target.run(caller, shell, script)).to_json(), handle=True)
        return bash_text((await target.run(script)).to_json())
    session = target if isinstance(target, Session) else target.host.session(caller=caller)
    try:
        return await _direct(session, name, arguments)
    finally:
        if session is not target:
            session.close()


async def _direct(session: Session, name: str, arguments: dict[str, Any]) -> str:
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
