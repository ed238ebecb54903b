"""Help and search text for `tools`: short, stable, and written for a model to read.

Works against a duck-typed catalog (`servers`, `server_entries(name)`, `top_level`,
`duplicate_notes()`) so it stays pure and testable with a fake.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from toolshell.command.schema_text import example_call, schema_lines, signature
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.registry.naming import command_text
from toolshell.safe_text import escape_lines

USAGE = """\
Usage:
  tools <server> --help | tools [<server>] <tool> --help | tools search <words> | tools plan < script
  tools [<server>] <tool> key=value --key value '{"key":"json"}'  (or a JSON object on stdin, or -)
  Values are JSON unless the key is a string (number=7 is 7, repo=42 stays "42"); --flag alone is true.
  key=@file sends a shell file exactly ("$(…)" drops trailing newlines); 'key=\\@x' is the text @x.
  Prints text as is, else JSON. On failure: exit 1, stderr {"error":{"code":"…","message":"…","retryable":…}}
  Calls run at once with & and wait: tools a x > a.json & tools b y > b.json & wait"""

EXACT_TEXT = (
    'Exact text: key=@file sends a file of the shell byte for byte; key="$(cat file)" drops its trailing '
    "newlines. 'key=\\@x' is the text @x."
)
"""Said under a tool's input when it takes a string: where a copy loses bytes, and the exact form."""

ARGUMENTS_NOTE = "key=<type> is required, [key=<type>] optional; key=@file sends a file's exact bytes."
"""The legend under a server's tool lines."""

VERB_HELP = {
    "search": (
        "tools search <words>\n"
        "Finds tools by name, description and parameter names, best first; also matches server names\n"
        "and loads a not-loaded server that matches. Names the servers it could not search (tools not\n"
        "listed yet) and how to include them.\n"
        "Example: tools search pull request"
    ),
    "plan": (
        "tools plan < script\n"
        "Runs nothing. Prints, as JSON, each tools call the script on stdin would make, with its input\n"
        "and risk (read_only, changes, needs_approval, blocked, checked_at_run_time).\n"
        "Example: tools plan <<'EOF'\n"
        "tools github list-pulls state=open\n"
        "EOF"
    ),
    "help": "tools --help | tools <server> --help | tools <server> <tool> --help",
}


class Catalog(Protocol):
    """What help needs from the catalog."""

    @property
    def servers(self) -> Sequence[ServerInfo]: ...

    @property
    def top_level(self) -> Sequence[ToolEntry]: ...

    def server_entries(self, name: str) -> Sequence[ToolEntry]: ...

    def duplicate_notes(self) -> Sequence[str]: ...


class Hit(Protocol):
    """A search hit: the entry and its score."""

    @property
    def entry(self) -> ToolEntry: ...

    @property
    def score(self) -> float: ...


def top_help(catalog: Catalog) -> str:
    """`tools --help`: the MCP servers, the other tools, usage, and duplicate-name notes.

    Args:
        catalog: The shell call's catalog.

    Returns:
        The help text, ending with a newline.
    """
    lines: list[str] = []
    servers = list(catalog.servers)
    if servers:
        lines.append("MCP servers (tools <server> --help lists its tools):")
        lines += _columns([(_dash(s.name), _server_summary(s)) for s in servers])
    top = list(catalog.top_level)
    if top:
        lines.append("Other tools (tools <tool> --help shows its input):")
        lines += _columns([(_words(e), _summary(e)) for e in top])
    if not servers and not top:
        lines.append("No tools are available.")
    lines.append(USAGE)
    notes = list(catalog.duplicate_notes())
    if notes:
        lines.append("Notes:")
        lines += [f"  {note}" for note in notes]
    return escape_lines("\n".join(lines)) + "\n"


def server_help(catalog: Catalog, server_name: str) -> str:
    """`tools <server> --help`: one line per tool: its arguments (required, then `[optional]`, with
    types; bounded, `schema_text.signature`), read-only/destructive marker and first sentence, so
    one help is enough to write the calls.

    Args:
        catalog: The shell call's catalog.
        server_name: The server's name as configured (hyphen/underscore spellings also match).

    Returns:
        The help text, ending with a newline.

    Raises:
        ToolshellError: `unknown_command` when no server has that name.
    """
    info = _find_server(catalog, server_name)
    entries = list(catalog.server_entries(info.name))
    head = f"tools {_dash(info.name)} <tool>: {_count(len(entries))}"
    if info.state == "needs_auth":
        head += " (needs login)"
    elif info.state not in ("", "ready"):
        head += f" ({info.state})"
    lines = [head]
    if info.description:
        lines.append(_first_sentence(info.description))
    lines += _columns([(_dash(e.name), _with_arguments(e)) for e in entries])
    if entries:
        lines.append(f"{ARGUMENTS_NOTE} More on one tool: tools {_dash(info.name)} <tool> --help")
    return escape_lines("\n".join(lines)) + "\n"


def tool_help(entry: ToolEntry) -> str:
    """`tools <tool> --help`: command, description, input properties, and an example call.

    Args:
        entry: The tool.

    Returns:
        The help text, ending with a newline.
    """
    marker = _marker(entry)
    lines = [entry.command + (f"  [{marker}]" if marker else "")]
    if entry.description.strip():
        lines.append(entry.description.strip())
    props = schema_lines(entry.input_schema)
    lines.append("Input:" if props else "Input: none")
    lines += props
    if _takes_text(entry.input_schema):
        lines.append(EXACT_TEXT)
    lines.append(f"Example: {example_call(entry.command, entry.input_schema)}")
    return escape_lines("\n".join(lines)) + "\n"


def _takes_text(schema: dict[str, Any]) -> bool:
    props = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(props, dict) and any(
        isinstance(p, dict) and (p.get("type") == "string" or "string" in (p.get("type") or [])) for p in props.values()
    )


def search_text(hits: Sequence[Hit], unsearched: Sequence[ServerInfo] = ()) -> str:
    """`tools search`: one line per hit, best first, then the servers it could not search.

    Args:
        hits: The ranked hits.
        unsearched: Servers whose tools are not known yet (`Catalog.unsearched`): named, with how
            to include them, so "No tools match" never hides a server nobody listed.

    Returns:
        The text, ending with a newline; a hint to try other words when nothing matched.
    """
    note = _unsearched_note(unsearched)
    if not hits:
        return "No tools match. Try other or fewer words, or tools --help for the full list.\n" + note
    rows = [(h.entry.command, _summary(h.entry)) for h in hits]
    return escape_lines("\n".join(_columns(rows, indent=""))) + "\n" + note


def _unsearched_note(servers: Sequence[ServerInfo]) -> str:
    """`Not searched (…): git (not loaded), jira (failed). Run `tools git --help` …`, or nothing."""
    if not servers:
        return ""
    named = ", ".join(f"{command_text(s.name).removeprefix('tools ')} ({_unsearched_state(s)})" for s in servers)
    first = command_text(servers[0].name)
    return (
        escape_lines(
            f"Not searched, their tools are not listed yet: {named}. "
            f"Run `{first} --help` to list a server's tools (or see why it cannot), then search again."
        )
        + "\n"
    )


def _unsearched_state(server: ServerInfo) -> str:
    if not server.loaded:
        return "not loaded"
    return "needs login" if server.state == "needs_auth" else server.state


def verb_help(word: str) -> str | None:
    """Help for a verb (`search`, `plan`, `help`), or None when `word` is not one."""
    text = VERB_HELP.get(word)
    return text + "\n" if text else None


def _find_server(catalog: Catalog, name: str) -> ServerInfo:
    servers = list(catalog.servers)
    for info in servers:
        if info.name == name:
            return info
    for info in servers:
        if _fold(info.name) == _fold(name):
            return info
    known = ", ".join(s.name for s in servers) or "none"
    raise ToolshellError(
        ErrorCode.UNKNOWN_COMMAND, f"no MCP server named {name!r} (servers: {known}); see tools --help"
    )


def _server_summary(info: ServerInfo) -> str:
    if not info.loaded:
        text = f"(not loaded, {_count(info.tool_count)})" if info.remembered else "(not loaded)"
    elif info.state == "needs_auth":
        text = "(needs login)"
    else:
        text = _count(info.tool_count)
        if info.state not in ("", "ready"):
            text += f" ({info.state})"
    return f"{text}  {_first_sentence(info.description)}" if info.description else text


def _with_arguments(entry: ToolEntry) -> str:
    args = signature(entry.input_schema)
    return f"{args}  {_summary(entry)}".strip() if args else _summary(entry)


def _summary(entry: ToolEntry) -> str:
    marker = _marker(entry)
    sentence = _first_sentence(entry.description)
    return f"[{marker}] {sentence}".rstrip() if marker else sentence


def _marker(entry: ToolEntry) -> str:
    notes = entry.annotations
    if notes.get("readOnlyHint") is True:
        return "read-only"
    if notes.get("destructiveHint") is True:
        return "destructive"
    return ""


def _first_sentence(text: str, limit: int = 120) -> str:
    """The first sentence of the first line, shortened to `limit` characters."""
    line = text.strip().split("\n", 1)[0].strip()
    ends = (i for i, ch in enumerate(line) if i and ch in ".!?" and (i + 1 == len(line) or line[i + 1].isspace()))
    sentence = line[: next(ends, len(line) - 1) + 1]  # a description comes from the server: no regex
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _columns(rows: list[tuple[str, str]], indent: str = "  ") -> list[str]:
    width = max((len(name) for name, _ in rows), default=0)
    return [f"{indent}{name.ljust(width)}  {text}".rstrip() for name, text in rows]


def _words(entry: ToolEntry) -> str:
    return entry.command.removeprefix("tools ")


def _dash(name: str) -> str:
    return name.replace("_", "-")


def _fold(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def _count(n: int) -> str:
    return f"{n} tool" if n == 1 else f"{n} tools"
