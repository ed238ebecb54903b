"""Configuration: the models of `toolshell.toml` (`Config()` is the embedded default), reading files
and other hosts' `mcpServers` JSON, and the small grammars config values use (names, tool patterns,
cron schedules).

Modules: `models` (pydantic models and the checks that need only the config), `loading` (TOML and
JSON, lookup order), `expansion` (`${VAR}` and which values are secrets), `names`, `patterns`, `cron`, `triggers`.
"""

from __future__ import annotations

from toolshell.config.expansion import expand_vars, referenced_vars
from toolshell.config.loading import (
    Source,
    config_in_use,
    config_source,
    find_config_path,
    import_mcp_json,
    load,
    load_file,
    load_source,
    load_text,
    parse_config,
    state_dir,
    state_location,
    to_toml,
    user_config_dir,
    user_data_dir,
)
from toolshell.config.models import (
    ApprovalConfig,
    Config,
    GuardConfig,
    McpSection,
    MountConfig,
    RoleConfig,
    RoleMcp,
    ServerConfig,
    ShellConfig,
    StateConfig,
    ToolsInShellConfig,
    WebFetchConfig,
)
from toolshell.config.triggers import TriggerConfig

__all__ = [
    "ApprovalConfig",
    "Config",
    "GuardConfig",
    "McpSection",
    "MountConfig",
    "RoleConfig",
    "RoleMcp",
    "ServerConfig",
    "ShellConfig",
    "StateConfig",
    "ToolsInShellConfig",
    "TriggerConfig",
    "WebFetchConfig",
    "expand_vars",
    "Source",
    "config_in_use",
    "config_source",
    "find_config_path",
    "import_mcp_json",
    "load",
    "load_file",
    "load_source",
    "load_text",
    "parse_config",
    "referenced_vars",
    "state_dir",
    "state_location",
    "to_toml",
    "user_config_dir",
    "user_data_dir",
]
