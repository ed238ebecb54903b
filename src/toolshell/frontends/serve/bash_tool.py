"""The `bash` tool as clients and LLM APIs see it: title, description, input and output schemas.

Shared by `toolshell serve` and the LLM adapters (`frontends.llm`). The description names the live
servers (name, tool count, a short description, `(not loaded)` for lazy ones) up to a bound that
keeps the whole definition small, then says how many more there are. When every listed server's
tools fit `SIGNATURE_CHARS`, each tool's line with its arguments follows its server, so a model
writes its first script without a `--help` turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import mcp_types as types

from toolshell.command.schema_text import signature
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.result import RunResult

BASH_TITLE = "Sandboxed bash with every tool"

BASH_USAGE = """Run a bash script in a sandboxed shell (no host files, network or environment).
In it, `tools` calls every tool of every configured MCP server:
  tools --help | tools <server> --help | tools <server> <tool> --help
  tools search <words>
  tools <server> <tool> k=v k=@file --flag '{"json": 1}'   (or JSON on stdin)
  tools plan <<'EOF' … EOF    what a script would call, with risk
Filter with jq; print only what you need. Errors: one JSON line on stderr, exit 1.
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
SIGNATURE_CHARS = 1200
"""The tool lines the description may carry (about 300 tokens): past it, none (`tools <server> --help`).
A small config is read in the definition every turn; a help turn's answer is read in every turn
after it, and costs the turn itself (`benchmarks/filesystem.py` measures both)."""


def bash_description(
    servers: Sequence[ServerInfo] = (), entries: Callable[[str], Sequence[ToolEntry]] | None = None
) -> str:
    """The description: usage, then the servers, at most `MAX_LISTED_SERVERS` of them.

    Args:
        servers: The catalog's servers.
        entries: A server's tools (`Catalog.server_entries`): given, and all of the listed servers'
            tool lines fit `SIGNATURE_CHARS`, each server's tools follow it with their arguments.
    """
    lines = [BASH_USAGE]
    if servers:
        listed = servers[:MAX_LISTED_SERVERS]
        tool_lines = _tool_lines(listed, entries)
        lines.append("Servers:" if tool_lines is None else "Servers and their tools:")
        for server in listed:
            lines.append(f"  {_server_line(server)}")
            lines += (tool_lines or {}).get(server.name, [])
        if len(servers) > MAX_LISTED_SERVERS:
            lines.append(f"  and {len(servers) - MAX_LISTED_SERVERS} more (tools --help)")
    return "\n".join(lines)


def _tool_lines(
    servers: Sequence[ServerInfo], entries: Callable[[str], Sequence[ToolEntry]] | None
) -> dict[str, list[str]] | None:
    """Each server's `    tool args` lines, or None when they do not all fit `SIGNATURE_CHARS`."""
    if entries is None:
        return None
    found: dict[str, list[str]] = {}
    size = 0
    for server in servers:
        rows = []
        for entry in entries(server.name):
            rows.append(
                f"    {' '.join(w for w in (entry.name.replace('_', '-'), signature(entry.input_schema)) if w)}"
            )
            size += len(rows[-1]) + 1
            if size > SIGNATURE_CHARS:
                return None
        found[server.name] = rows
    return found if size else None


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
    "SIGNATURE_CHARS",
    "BASH_DESCRIPTION",
    "BASH_OUTPUT_SCHEMA",
    "BASH_SCHEMA",
    "BASH_TITLE",
    "bash_description",
    "bash_result",
    "bash_text",
]
