"""The `bash` tool as clients and LLM APIs see it: title, description, input and output schemas,
and the text of its result.

Shared by `toolshell serve` and the LLM adapters (`frontends.llm`). The description is built by
one function, `bash_description`, by one rule (`benchmarks/README.md` has the figures behind it):
when the servers' tool lines fit `SIGNATURE_CHARS` (a small config), each server is followed by
its tools with their arguments, so a model writes its first script without a `--help` turn;
otherwise the servers are named on one line with their tool counts, up to `MAX_LISTED_SERVERS`,
and `tools --help` lists the rest.

The result: the model reads plain text (stdout as it is, then a trailer of what is not the
default, `bash_text`); code reads the whole object as `structuredContent` (`RunResult.to_json`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mcp_types as types

from toolshell.command.schema_text import signature
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.result import RunResult

BASH_TITLE = "Sandboxed bash with every tool"

BASH_USAGE = """Run a bash script in a sandbox (no host files, network or env). `tools` calls MCP tools:
  tools <server> <tool> k=v k=@file --flag '{"json":1}'   (or JSON on stdin)
  tools --help | tools <server> [<tool>] --help | tools search <words> | tools plan < script
Print only what you need (jq). Run calls at once with & and wait. Errors: JSON on stderr, exit 1.
A result is stdout, then [exit N], [stderr] and notes as needed. Pass [shell …] back as `shell`."""

BASH_DESCRIPTION = BASH_USAGE
"""The description without the server list (no host at hand)."""

BASH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {"type": "string"},
        "shell": {"type": "string"},  # the description says what it takes
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
"""The `toolshell run --json` object (`RunResult.to_json`): the result's `structuredContent`."""

NO_OUTPUT = "(no output)"
_SAID = {"exit_code", "success", "stdout", "stderr", "running", "shell", "earlier"}
"""The keys `bash_text` writes its own way; any other key is a `[key] value` line."""
_LABELS = {"tools": "report", "hints": "hint", "note": "note", "shell_note": "shell note"}


def bash_text(body: Mapping[str, Any], *, handle: bool = False) -> str:
    """What the model reads of a `bash` result: stdout as it is, then only what is not the default.

    The trailer's lines: `[running]` or `[exit N]`, `[stderr]` and its text, `[report]` (the stop
    report as compact JSON), `[hint]`, `[note]`, `[shell note]`, and `[shell sh_…]` where the
    model needs the handle to keep its shell (`handle`: a transport that keeps no shell per client;
    and always with `running` or a `shell note`). An earlier yielded call's rest comes first, under
    `[earlier call]`. A result with nothing to say reads `(no output)`.

    Args:
        body: The result's object (`RunResult.to_json`, or a yielded call's).
        handle: Say the shell handle even when nothing else needs it.
    """
    parts = []
    earlier = body.get("earlier")
    if isinstance(earlier, Mapping):
        parts.append("[earlier call]\n" + bash_text(earlier) + "\n[this call]")
    stdout = str(body.get("stdout") or "")
    trailer = _trailer(body, handle)
    if stdout and trailer and not stdout.endswith("\n"):
        stdout += "\n"
    parts.append(stdout + "\n".join(trailer))
    return "\n".join(parts) if any(parts) else NO_OUTPUT


def _trailer(body: Mapping[str, Any], handle: bool) -> list[str]:
    lines = []
    if body.get("running"):
        lines.append("[running]")
    elif body.get("exit_code", 0) != 0:
        lines.append(f"[exit {body.get('exit_code')}]")
    stderr = str(body.get("stderr") or "")
    if stderr:
        lines.append("[stderr]\n" + stderr.removesuffix("\n"))
    for key, value in body.items():
        if key in _SAID or value in (None, "", [], {}):
            continue
        label = _LABELS.get(key, key)
        values = value if key == "hints" and isinstance(value, list) else [value]
        lines += [f"[{label}] {v if isinstance(v, str) else _compact(v)}" for v in values]
    needed = handle or body.get("running") or body.get("shell_note")
    if needed and body.get("shell"):
        lines.append(f"[shell {body['shell']}]")
    return lines


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def bash_result(result: RunResult, *, handle: bool = False, structured: bool = True) -> types.CallToolResult:
    """The `bash` tool's MCP result: the text the model reads (`bash_text`), and the whole object
    as `structuredContent` for code (it validates against `BASH_OUTPUT_SCHEMA`), unless not
    `structured` (a client in `SHOWS_STRUCTURE`, which gets no output schema either)."""
    body = result.to_json()
    text = types.TextContent(type="text", text=bash_text(body, handle=handle))
    return types.CallToolResult(
        content=[text], structured_content=body if structured else None, is_error=not result.success
    )


SHOWS_STRUCTURE = frozenset({"codex-mcp-client"})
"""Clients (their `clientInfo.name`) that hand their model `structuredContent`, serialized, in
place of `content`: Codex 0.171.0, run against `serve` in `benchmarks/README.md`. `bash` lists no
output schema for them and its results carry no `structuredContent`, so their model reads the text."""


MAX_LISTED_SERVERS = 8
"""Servers named in the description; past it, "and N more" (keeps `bash` near 250 tokens)."""
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
    if not servers:
        return BASH_USAGE
    listed = servers[:MAX_LISTED_SERVERS]
    tool_lines = _tool_lines(listed, entries)
    if tool_lines is None:  # one line: names and counts
        more = f", and {len(servers) - len(listed)} more (tools --help)" if len(servers) > len(listed) else ""
        return f"{BASH_USAGE}\nServers: {', '.join(_server_line(s) for s in listed)}{more}."
    lines = [BASH_USAGE, "Servers and their tools:"]
    for server in listed:
        lines.append(f"{_server_line(server)}:" if tool_lines.get(server.name) else _server_line(server))
        lines += tool_lines.get(server.name, [])
    if len(servers) > len(listed):
        lines.append(f"and {len(servers) - len(listed)} more (tools --help)")
    return "\n".join(lines)


def _tool_lines(
    servers: Sequence[ServerInfo], entries: Callable[[str], Sequence[ToolEntry]] | None
) -> dict[str, list[str]] | None:
    """Each server's ` tool args` lines, or None when they do not all fit `SIGNATURE_CHARS`."""
    if entries is None:
        return None
    found: dict[str, list[str]] = {}
    size = 0
    for server in servers:
        rows = []
        for entry in entries(server.name):
            rows.append(" " + " ".join(w for w in (entry.name.replace("_", "-"), compact_signature(entry)) if w))
            size += len(rows[-1]) + 1
            if size > SIGNATURE_CHARS:
                return None
        found[server.name] = rows
    return found if size else None


def compact_signature(entry: ToolEntry) -> str:
    """A tool's arguments as the description lists them: `signature`'s, with `=<string>` (the
    usual type) left as `=`: `path= [head=<number>]`."""
    return signature(entry.input_schema).replace("=<string>", "=")


FAILED_CHARS = 60
"""A failed server's reason, cut (`tools --help` and `toolshell status` give all of it)."""


def _server_line(server: ServerInfo) -> str:
    """`name (N tools)`. The count shows as soon as it is known: from the server, or from its
    remembered list while it is not loaded or still connecting (a model needs the count, not the
    state); a server without one says its state until `list_changed` brings the count, and a
    failed one why (`(failed: reason)`)."""
    tools = f"{server.tool_count} tool{'' if server.tool_count == 1 else 's'}"
    state = server.state
    if state == "failed" and server.last_error:
        reason = " ".join(server.last_error.split())
        state = f"failed: {reason if len(reason) <= FAILED_CHARS else reason[: FAILED_CHARS - 1].rstrip() + '…'}"
    if not server.loaded:  # a call loads it: the name is enough, and the count when remembered
        count = f"({tools})" if server.remembered else ""
    elif server.state in ("ready", "connecting") and (server.state == "ready" or server.remembered):
        count = f"({tools})"
    else:
        count = f"({tools}, {state})" if server.remembered else f"({state})"
    return f"{server.name.replace('_', '-')} {count}".rstrip()  # as scripts write it: `tools text-metrics …`


__all__ = [
    "BASH_DESCRIPTION",
    "BASH_OUTPUT_SCHEMA",
    "BASH_SCHEMA",
    "BASH_TITLE",
    "MAX_LISTED_SERVERS",
    "NO_OUTPUT",
    "SHOWS_STRUCTURE",
    "SIGNATURE_CHARS",
    "bash_description",
    "bash_result",
    "bash_text",
    "compact_signature",
]
