"""Server tool filters and roles (DESIGN §7, seed 001 `tools`, `auto_bind`, `server_refs`, `allowed_tools`)."""

from __future__ import annotations

from typing import Any

from toolshell.builtin import SHIPPED
from toolshell.config import Config, RoleConfig
from toolshell.registry import ToolEntry
from toolshell.registry.filters import (
    active_servers,
    configured_servers,
    filter_entries,
    role_allows,
    role_problems,
    tool_allowed,
)


def _server(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "stdio", "command": "srv", **extra}


def _config(servers: list[dict[str, Any]], roles: list[dict[str, Any]] | None = None) -> Config:
    return Config.model_validate({"mcp": {"servers": servers}, "roles": roles or [], "include_builtins": False})


def _role(allowed: list[str], refs: list[str] | None = None) -> RoleConfig:
    return RoleConfig.model_validate({"name": "r", "mcp": {"server_refs": refs or [], "allowed_tools": allowed}})


def _names(servers: list[Any]) -> list[str]:
    return [s.name for s in servers]


# --- server `tools` patterns --------------------------------------------------------------------


def test_an_empty_pattern_list_allows_every_tool() -> None:
    assert tool_allowed("anything", [])


def test_an_exact_pattern_allows_only_that_name() -> None:
    assert tool_allowed("text_length", ["text_length"])
    assert not tool_allowed("text_length_v2", ["text_length"])
    assert not tool_allowed("text", ["text_length"])


def test_a_trailing_star_pattern_allows_names_with_that_prefix() -> None:
    assert tool_allowed("text_length", ["text_*"])
    assert tool_allowed("text_", ["text_*"])
    assert not tool_allowed("word_count", ["text_*"])
    assert tool_allowed("word_count", ["text_*", "word_count"])
    assert tool_allowed("anything", ["*"])


def test_patterns_compare_folded_names() -> None:
    assert tool_allowed("text_length", ["Text-*"])
    assert tool_allowed("text-length", ["text_length"])


# --- which servers are active -------------------------------------------------------------------


def test_with_no_role_every_enabled_server_is_active_in_configured_order() -> None:
    config = _config([_server("b"), _server("off", enabled=False), _server("a")])
    assert _names(active_servers(config, None)) == ["b", "a"]


def test_a_role_activates_the_servers_its_server_refs_name() -> None:
    config = _config(
        [_server("git"), _server("github"), _server("fs")], [{"name": "dev", "mcp": {"server_refs": ["fs", "git"]}}]
    )
    assert _names(active_servers(config, "dev")) == ["git", "fs"]


def test_a_server_whose_auto_bind_lists_the_role_is_active_for_it() -> None:
    config = _config(
        [_server("git"), _server("text_metrics", auto_bind=["developer:general", "dev"])],
        [{"name": "dev", "mcp": {"server_refs": ["git"]}}],
    )
    assert _names(active_servers(config, "dev")) == ["git", "text_metrics"]
    assert _names(active_servers(config, "developer:general")) == ["text_metrics"]


def test_a_role_excludes_servers_it_neither_references_nor_is_auto_bound_to() -> None:
    config = _config(
        [_server("git"), _server("github", auto_bind=["other"])], [{"name": "dev", "mcp": {"server_refs": ["git"]}}]
    )
    assert _names(active_servers(config, "dev")) == ["git"]
    assert _names(active_servers(config, "nobody")) == []


def test_a_disabled_server_stays_inactive_even_when_a_role_references_it() -> None:
    config = _config([_server("git", enabled=False)], [{"name": "dev", "mcp": {"server_refs": ["git"]}}])
    assert active_servers(config, "dev") == []


def test_shipped_builtins_follow_the_declared_servers_unless_declared_or_excluded() -> None:
    with_builtins = Config.model_validate(
        {"mcp": {"servers": [_server("git"), {"name": "runtime", "type": "builtin"}]}}
    )
    shipped_rest = [name for name in SHIPPED if name != "runtime"]
    assert _names(configured_servers(with_builtins)) == ["git", "runtime", *shipped_rest]
    assert _names(configured_servers(_config([_server("git")]))) == ["git"]


# --- role allowed_tools ---------------------------------------------------------------------------


def test_no_role_or_empty_allowed_tools_allows_every_tool() -> None:
    assert role_allows(None, "git", "push")
    assert role_allows(_role([]), "git", "push")


def test_a_server_star_entry_allows_every_tool_of_that_server_only() -> None:
    role = _role(["git:*"])
    assert role_allows(role, "git", "push")
    assert not role_allows(role, "github", "push")


def test_a_server_pattern_entry_allows_matching_tools_of_that_server() -> None:
    role = _role(["text_metrics:text_*"])
    assert role_allows(role, "text_metrics", "text_length")
    assert not role_allows(role, "text_metrics", "word_count")
    assert role_allows(role, "text-metrics", "Text-Length")


def test_an_entry_without_a_server_applies_to_every_server() -> None:
    role = _role(["view"])
    assert role_allows(role, "filesystem", "view")
    assert role_allows(role, "other", "view")
    assert not role_allows(role, "filesystem", "write")


def test_filter_entries_applies_the_server_filter_and_the_role() -> None:
    config = _config([_server("fs", tools=["read_*", "write_file", "view"])])
    entries = [ToolEntry("fs", n) for n in ["read_file", "read_dir", "write_file", "delete_file", "view"]]
    role = _role(["fs:read_*", "fs:view"])
    kept = filter_entries(entries, config.server("fs"), role)
    assert [e.name for e in kept] == ["read_file", "read_dir", "view"]
    assert [e.name for e in filter_entries(entries, config.server("fs"), None)] == [
        "read_file",
        "read_dir",
        "write_file",
        "view",
    ]


def test_roles_do_not_filter_top_level_tools() -> None:
    assert filter_entries([ToolEntry(None, "web_fetch")], None, _role(["git:*"])) == [ToolEntry(None, "web_fetch")]


def test_role_problems_name_servers_the_role_cannot_reach_and_servers_left_without_tools() -> None:
    config = _config(
        [_server("git"), _server("github"), _server("fs")],
        [
            {"name": "dev", "mcp": {"server_refs": ["git", "fs"], "allowed_tools": ["git:*", "github:get_*"]}},
            {"name": "ok", "mcp": {"server_refs": ["git"], "allowed_tools": ["view"]}},
            {"name": "star", "mcp": {"server_refs": ["git"], "allowed_tools": ["git:st*us"]}},
        ],
    )
    assert role_problems(config) == [
        "role 'dev': allowed_tools entry 'github:get_*' names server 'github', which the role does not use; "
        "add 'github' to its server_refs or remove the entry",
        "role 'dev' uses server 'fs' but no allowed_tools entry names it, so none of its tools are allowed; "
        "add 'fs:*' to allowed_tools",
        "role 'star': allowed_tools entry 'git:st*us' has a '*' before its end; only a trailing '*' is allowed "
        "(e.g. 'git:status_*')",
    ]
