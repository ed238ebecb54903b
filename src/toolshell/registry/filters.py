"""Which servers and tools a session may use: server tool filters and roles (seed 001).

Pure list transforms over config and tool entries. The rules:

- A server's `tools` list filters its tools: exact names or trailing-`*` prefix patterns; an empty
  list allows every tool (seed 001 `is_tool_allowed_by_patterns`). Names are compared folded, so
  `text-*` and `text_*` are the same pattern.
- With no role, every enabled server is active. With a role, a server is active when the role's
  `mcp.server_refs` names it or the server's `auto_bind` lists the role name. A server declaration
  alone does not enable it for a role.
- A role's `mcp.allowed_tools` is an allow-list of `server:pattern` entries (`git:*`,
  `text_metrics:text_*`); an entry without `server:` (`view`) applies to every server. An empty
  list allows every tool of the role's servers; a non-empty one allows only what it matches, so a
  server bound to the role that no entry names contributes no tools (`role_problems` flags it).
- Roles govern MCP servers only; top-level tools (`web_fetch`) are not filtered by roles.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from toolshell.config import Config, RoleConfig, ServerConfig
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.entry import ToolEntry
from toolshell.registry.naming import fold
from toolshell.shipped import SHIPPED


def tool_allowed(name: str, patterns: list[str]) -> bool:
    """Whether a tool name passes a list of exact names and trailing-`*` prefix patterns.

    Args:
        name: the tool name as the server lists it.
        patterns: e.g. `["text_*", "read_file"]`; empty means every tool.
    """
    if not patterns:
        return True
    folded = fold(name)
    return any(_matches(folded, fold(p)) for p in patterns)


def _matches(folded_name: str, folded_pattern: str) -> bool:
    if folded_pattern.endswith("*"):
        return folded_name.startswith(folded_pattern[:-1])
    return folded_name == folded_pattern


def configured_servers(config: Config) -> list[ServerConfig]:
    """Every server in configured order: the file's `[[mcp.servers]]`, then the shipped built-ins
    the file does not declare itself (when `include_builtins` is on)."""
    servers = list(config.mcp.servers)
    if config.include_builtins:
        declared = {fold(s.name) for s in servers}
        servers += [ServerConfig(name=n, type="builtin") for n in SHIPPED if fold(n) not in declared]
    return servers


def active_servers(config: Config, role: str | None) -> list[ServerConfig]:
    """The enabled servers a session with `role` uses, in configured order.

    Args:
        config: the whole configuration.
        role: the session's role name (a `[[roles]]` name or a tag such as `developer:general`
            that only `auto_bind` lists), or None for no role.
    """
    enabled = [s for s in configured_servers(config) if s.enabled]
    if role is None:
        return enabled
    role_cfg = config.role_named(role)
    refs = {fold(r) for r in role_cfg.mcp.server_refs} if role_cfg else set()
    return [s for s in enabled if fold(s.name) in refs or role in s.auto_bind]


class UnknownRole(ToolshellError):
    """A role the config does not know: a usage mistake (the CLI exits 2), never "no servers"."""

    usage_error = True


def known_roles(config: Config) -> list[str]:
    """Every role a session may take: the `[[roles]]` names and the servers' `auto_bind` tags."""
    names = [r.name for r in config.roles] + [tag for s in configured_servers(config) for tag in s.auto_bind]
    return sorted(set(names))


def check_role(config: Config, role: str | None) -> None:
    """Refuse a role no `[[roles]]` entry names and no server binds, with the nearest names: a
    misspelt role would otherwise leave the session with no servers at all.

    Raises:
        UnknownRole: `invalid_input`, naming the nearest known roles.
    """
    if role is None:
        return
    known = known_roles(config)
    if role in known:
        return
    near = difflib.get_close_matches(role, known, n=3, cutoff=0.6)
    if near:
        hint = f"did you mean {', '.join(near)}?"
    elif known:
        hint = f"the config knows {', '.join(known[:10])}"
    else:
        hint = "the config declares no roles ([[roles]] name = …, or a server's auto_bind)"
    raise UnknownRole(ErrorCode.INVALID_INPUT, f"unknown role {role!r}; {hint}")


def role_allows(role: RoleConfig | None, server: str, tool: str) -> bool:
    """Whether a role's `allowed_tools` lets a session call `tool` of `server`.

    Args:
        role: the session's role config, or None (no role: everything is allowed).
        server: the MCP server name.
        tool: the tool name as the server lists it.
    """
    if role is None or not role.mcp.allowed_tools:
        return True
    return any(_entry_allows(entry, server, tool) for entry in role.mcp.allowed_tools)


def _entry_allows(entry: str, server: str, tool: str) -> bool:
    entry_server, sep, pattern = entry.partition(":")
    if not sep:  # a bare tool pattern applies to every server
        return tool_allowed(tool, [entry])
    if entry_server != "*" and fold(entry_server) != fold(server):
        return False
    return tool_allowed(tool, [pattern])


def filter_entries(
    entries: Iterable[ToolEntry], server_config: ServerConfig | None, role: RoleConfig | None
) -> list[ToolEntry]:
    """Keep the entries that pass the server's `tools` filter and the role's `allowed_tools`.

    Args:
        entries: the tools one server listed (or top-level tools, which roles do not filter).
        server_config: that server's config, or None to skip the server filter.
        role: the session's role config, or None.
    """
    patterns = server_config.tools if server_config else []
    return [
        e
        for e in entries
        if tool_allowed(e.name, patterns) and (e.server is None or role_allows(role, e.server, e.name))
    ]


def role_problems(config: Config) -> list[str]:
    """Role settings that cannot do what they seem to, each with what to write instead.

    Used by `toolshell config validate` and diagnostics; an empty list means none.
    """
    problems: list[str] = []
    for role in config.roles:
        bound = {fold(s.name): s.name for s in active_servers(config, role.name)}
        named: set[str] = set()
        for entry in role.mcp.allowed_tools:
            server, sep, pattern = entry.partition(":")
            pattern = pattern if sep else entry
            if "*" in pattern[:-1]:
                problems.append(
                    f"role {role.name!r}: allowed_tools entry {entry!r} has a '*' before its end; "
                    "only a trailing '*' is allowed (e.g. 'git:status_*')"
                )
            if not sep or server == "*":
                named |= bound.keys()
                continue
            named.add(fold(server))
            if fold(server) not in bound:
                problems.append(
                    f"role {role.name!r}: allowed_tools entry {entry!r} names server {server!r}, which the role "
                    f"does not use; add {server!r} to its server_refs or remove the entry"
                )
        if role.mcp.allowed_tools:
            problems += [
                f"role {role.name!r} uses server {name!r} but no allowed_tools entry names it, so none of its "
                f"tools are allowed; add '{name}:*' to allowed_tools"
                for key, name in bound.items()
                if key not in named
            ]
    return problems


def config_warnings(config: Config) -> list[tuple[str, str]]:
    """Settings that load but probably do not do what was meant (shown by `config validate`)."""
    found = [("roles", p) for p in role_problems(config)]
    found += [
        (
            f"mcp.servers[{s.name}]",
            f"no shipped built-in server is named {s.name!r} ({', '.join(SHIPPED)}); add "
            '`module = "package.module:attr"`, or pass it to Host(servers=...) from Python',
        )
        for s in config.mcp.servers
        if s.type == "builtin" and not s.module and s.name not in SHIPPED
    ]
    return found
