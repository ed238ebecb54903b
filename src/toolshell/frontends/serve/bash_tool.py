"""The `bash` tool as clients and LLM APIs see it: title, description, input and output schemas.

Shared by `toolshell serve` and the LLM adapters (`frontends.llm`). The description names the live
servers (name, tool count, a short description, `(not loaded)` for lazy ones) up to a bound that
keeps the whole definition small, then says how many more there are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from toolshell.registry.entry import ServerInfo
from toolshell.result import RunResult

BASH_TITLE = "Sandboxed bash with every tool"

BASH_USAGE = """Run a bash script in a sandboxed shell (no host files, network or environment).
Inside it, `tools` calls every tool of every configured MCP server:
  tools --help                      list servers and tools
  tools <server> --help             one server's tools with their arguments
  tools <server> <tool> --help      a tool's input schema
  tools search <words>              find tools
  tools <server> <tool> k=v k=@file --flag '{"json": 1}'   call (stdin JSON works too)
  tools plan <<'EOF' … EOF          what a script would call, with risk
Filter with jq; print only what you need. Errors are one JSON line on stderr, exit 1.
Fan out with `&` and `wait`: the calls run at once.
Output past the cap keeps head and tail and names a file with all of it.
Pass a result's `shell` back to keep its files, cd and variables.
`running: true`: call again with its `shell` to get the rest (as `earlier`)."""

BASH_DESCRIPTION = BASH_USAGE
"""The description without the server list (no host at hand)."""

BASH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {"type": "string", "description": "The bash script to run."},
        "shell": {"type": "string", "description": "An earlier result's `shell`, to run there."},
    },
    "required": ["script"],
    "additionalProperties": False,
}

BASH_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "exit_code": {"type": "integer"},
        "success": {"type": "boolean"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "tools": {"type": "object", "description": "The stop report."},
        "hints": {"type": "array", "items": {"type": "string"}},
        "shell": {"type": "string"},
    },
    "required": ["exit_code", "success", "stdout", "stderr"],
}
"""The `toolshell run --json` object (`RunResult.to_json`)."""


def bash_text(result: RunResult) -> str:
    """The text the model reads: the result's JSON object, compact.

    It stays the serialized `structuredContent` (the MCP spec asks for that text block, and
    clients parse it): a text shape with stdout unescaped saved another 3-10% of a multi-line
    result's tokens in `benchmarks/tokens.py`, but would break every client that reads it as JSON.
    No spaces after `:` and `,` save about 8 tokens a result.
    """
    return json.dumps(result.to_json(), ensure_ascii=False, separators=(",", ":"))


def bash_result(result: RunResult) -> types.CallToolResult:
    """The `bash` tool's MCP result: one text block and the same object as `structuredContent`.

    The shell handle is said once, as the object's `shell`: no second text block repeats it.
    """
    text = types.TextContent(type="text", text=bash_text(result))
    return types.CallToolResult(content=[text], structured_content=result.to_json(), is_error=not result.success)


MAX_LISTED_SERVERS = 6
"""Servers named in the description; past it, "and N more" (keeps `bash` under 600 tokens)."""
SUMMARY_CHARS = 48


def bash_description(servers: Sequence[ServerInfo] = ()) -> str:
    """The description: usage, then the servers, at most `MAX_LISTED_SERVERS` of them."""
    lines = [BASH_USAGE]
    if servers:
        lines.append("Servers:")
        lines += [f"  {_server_line(s)}" for s in servers[:MAX_LISTED_SERVERS]]
        if len(servers) > MAX_LISTED_SERVERS:
            lines.append(f"  and {len(servers) - MAX_LISTED_SERVERS} more (tools --help)")
    return "\n".join(lines)


def _server_line(server: ServerInfo) -> str:
    """`name (N tools) – summary`. The count shows as soon as it is known: from the server, or from
    its remembered list while it is not loaded or still connecting (a model needs the count, not
    the state); a server without one says its state until `list_changed` brings the count."""
    tools = f"{server.tool_count} tool{'' if server.tool_count == 1 else 's'}"
    if not server.loaded:
        count = f"(not loaded, {tools})" if server.remembered else "(not loaded)"
    elif server.state == "connecting" and server.remembered:
        count = f"({tools})"
    elif server.state != "ready":
        count = f"({tools}, {server.state})" if server.remembered else f"({server.state})"
    else:
        count = f"({tools})"
    summary = " ".join(server.description.split())
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "…"
    name = server.name.replace("_", "-")  # as scripts write it: `tools text-metrics …`
    return " ".join(w for w in (name, count, summary and f"– {summary}") if w)


__all__ = [
    "MAX_LISTED_SERVERS",
    "BASH_DESCRIPTION",
    "BASH_OUTPUT_SCHEMA",
    "BASH_SCHEMA",
    "BASH_TITLE",
    "bash_description",
    "bash_result",
    "bash_text",
]
