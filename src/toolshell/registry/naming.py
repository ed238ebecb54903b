"""How tools are named: flat names (`mcp_<server>__<tool>`), command words, and folding.

`flat_name` and `parse_flat_name` are inverse functions. The round trip
`parse_flat_name(flat_name(s, t)) == (s, t)` holds when:

- `t` is a non-empty tool name;
- `s` is None, or a non-empty server name that contains no `__` and does not end with `_`
  (`mcp_a___b` could be server `a_` + tool `b` or server `a` + tool `_b`; we read the first `__`
  as the separator, so the server is `a`);
- for `s` None (a top-level tool), `t` is not itself shaped like a flat MCP name
  (`mcp_<x>__<y>` with non-empty `<x>` and `<y>`).

Config server names are `[A-Za-z0-9][A-Za-z0-9_-]*`; `catalog.Catalog` reports the rare server
names that break these limits as collisions instead of mis-routing them.
"""

from __future__ import annotations

_PREFIX = "mcp_"
_SEP = "__"


def fold(name: str) -> str:
    """The form two names are compared in: hyphens become underscores, letters lower-case.

    Args:
        name: a server, tool or key name as written by a person or a server.

    Returns:
        The folded name; `fold("List-Pulls") == fold("list_pulls") == "list_pulls"`.
    """
    return name.replace("-", "_").lower()


def flat_name(server: str | None, tool: str) -> str:
    """The flat name of a tool: `mcp_<server>__<tool>`, or the plain name of a top-level tool.

    Args:
        server: the MCP server name, or None for a top-level tool such as `web_fetch`.
        tool: the tool name as the server lists it.
    """
    return f"{_PREFIX}{server}{_SEP}{tool}" if server else tool


def parse_flat_name(flat: str) -> tuple[str | None, str]:
    """Split a flat name into `(server, tool)`; `(None, flat)` for a top-level tool name.

    The separator is the first `__` after the `mcp_` prefix (server names hold no `__`).
    A string without a non-empty server part and a non-empty tool part is a top-level name.

    Args:
        flat: e.g. `mcp_github__list_pulls` or `web_fetch`.
    """
    if flat.startswith(_PREFIX):
        server, sep, tool = flat[len(_PREFIX) :].partition(_SEP)
        if sep and server and tool:
            return server, tool
    return None, flat


def command_words(server: str | None, tool: str) -> list[str]:
    """The words a script writes after `tools`: `["github", "list-pulls"]` or `["web-fetch"]`.

    Underscores become hyphens (the shell spelling); case is kept for display. Compare words
    with `fold`.
    """
    parts = [server, tool] if server else [tool]
    return [p.replace("_", "-") for p in parts]


def command_text(server: str | None, tool: str | None = None) -> str:
    """The whole command as a script writes it: `tools github list-pulls`, `tools github`.

    Args:
        server: the server name, or None for a top-level tool.
        tool: the tool name, or None to name just the server.
    """
    if tool is None:
        return "tools " + (server or "").replace("_", "-")
    return "tools " + " ".join(command_words(server, tool))
