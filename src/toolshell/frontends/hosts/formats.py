"""Where each agent host keeps its MCP servers, and the shape of one entry there.

Facts from each host's documentation (checked 2026-12):
- Claude Code: project `.mcp.json`, user `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`), both
  `{"mcpServers": {name: {"type": "stdio", "command", "args", "env"}}}`; a project's servers are
  approved in Claude Code before they start.
- Claude Desktop: `claude_desktop_config.json` in `~/Library/Application Support/Claude` (macOS),
  `%APPDATA%\\Claude` (Windows), `~/.config/Claude` (Linux builds); `mcpServers`.
- Codex: `~/.codex/config.toml` (`$CODEX_HOME`), project `.codex/config.toml` (trusted projects
  only); `[mcp_servers.NAME]` with `command`, `args`, `env`, or `url`.
- Cursor: `.cursor/mcp.json` or `~/.cursor/mcp.json`; `mcpServers`.
- VS Code: `.vscode/mcp.json` or the profile's `mcp.json` (`Code/User/`); `servers`, each with `type`.
- Gemini CLI: `.gemini/settings.json` or `~/.gemini/settings.json`; `mcpServers` (`httpUrl` for HTTP).
- opencode: `opencode.json` or `~/.config/opencode/opencode.json`; `mcp`, an entry is
  `{"type": "local", "command": [argv...], "environment", "enabled"}`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolshell.frontends.hosts.launch import Launch

Where = Callable[[Path, Path, Mapping[str, str]], Path]
"""(project directory, home, environment) → the file."""


@dataclass(frozen=True)
class HostFormat:
    """One agent host: its files by scope, the table of servers in them, and one entry's shape."""

    name: str
    title: str
    kind: Literal["json", "toml"]
    key: str  # the top-level table of servers
    scopes: dict[str, Where]
    entry: Callable[[Launch], dict[str, Any]]
    read: Callable[[dict[str, Any]], dict[str, Any]]  # an entry as `mcpServers` JSON (for --move)
    starts_with: dict[str, Any] = field(default_factory=dict)  # a new file's other keys
    notes: dict[str, str] = field(default_factory=dict)  # by scope: what to do next in the host


def _stdio(launch: Launch) -> dict[str, Any]:
    return {"command": launch.command, "args": launch.args}


def _typed_stdio(launch: Launch) -> dict[str, Any]:
    return {"type": "stdio", "command": launch.command, "args": launch.args}


def _opencode_entry(launch: Launch) -> dict[str, Any]:
    return {"type": "local", "command": launch.argv, "enabled": True}


def _as_is(spec: dict[str, Any]) -> dict[str, Any]:
    return dict(spec)


def _codex_read(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: spec[k] for k in ("command", "args", "env", "cwd", "url") if k in spec}
    headers = dict(spec.get("http_headers") or {})
    if variable := spec.get("bearer_token_env_var"):
        headers["Authorization"] = f"Bearer ${{{variable}}}"
    if headers:
        out["headers"] = headers
    if spec.get("enabled") is False:
        out["disabled"] = True
    return out


def _gemini_read(spec: dict[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    if "httpUrl" in out:
        out["url"] = out.pop("httpUrl")
    return out


def _opencode_read(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    command = spec.get("command")
    if spec.get("type") == "remote" or "url" in spec:
        out.update(url=spec.get("url", ""), headers=spec.get("headers") or {})
    elif isinstance(command, list) and command:
        out.update(command=command[0], args=command[1:])
    if spec.get("environment"):
        out["env"] = spec["environment"]
    if spec.get("enabled") is False:
        out["disabled"] = True
    return out


def _app_dir(home: Path, env: Mapping[str, str]) -> Path:
    """Where desktop apps keep their settings on this system."""
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if os.name == "nt":
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config")


def _claude_user(_: Path, home: Path, env: Mapping[str, str]) -> Path:
    return Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json" if env.get("CLAUDE_CONFIG_DIR") else home / ".claude.json"


def _codex_user(_: Path, home: Path, env: Mapping[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml"


def _opencode_user(_: Path, home: Path, env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode" / "opencode.json"


def _in_project(*parts: str) -> Where:
    return lambda project, _home, _env: project.joinpath(*parts)


def _in_home(*parts: str) -> Where:
    return lambda _project, home, _env: home.joinpath(*parts)


def _in_app_dir(*parts: str) -> Where:
    return lambda _project, home, env: _app_dir(home, env).joinpath(*parts)


HOSTS: dict[str, HostFormat] = {
    h.name: h
    for h in (
        HostFormat(
            "claude-code",
            "Claude Code",
            "json",
            "mcpServers",
            {"user": _claude_user, "project": _in_project(".mcp.json")},
            lambda launch: {**_typed_stdio(launch), "env": {}},
            _as_is,
            notes={"project": "Claude Code asks once to approve a project's .mcp.json servers (on its next start)."},
        ),
        HostFormat(
            "claude-desktop",
            "Claude Desktop",
            "json",
            "mcpServers",
            {"user": _in_app_dir("Claude", "claude_desktop_config.json")},
            _stdio,
            _as_is,
            notes={"user": "Restart Claude Desktop to load it."},
        ),
        HostFormat(
            "codex",
            "Codex",
            "toml",
            "mcp_servers",
            {"user": _codex_user, "project": _in_project(".codex", "config.toml")},
            _stdio,
            _codex_read,
            notes={"project": "Codex reads a project's .codex/config.toml only once the project is trusted."},
        ),
        HostFormat(
            "cursor",
            "Cursor",
            "json",
            "mcpServers",
            {"user": _in_home(".cursor", "mcp.json"), "project": _in_project(".cursor", "mcp.json")},
            _stdio,
            _as_is,
        ),
        HostFormat(
            "vscode",
            "VS Code",
            "json",
            "servers",
            {"user": _in_app_dir("Code", "User", "mcp.json"), "project": _in_project(".vscode", "mcp.json")},
            _typed_stdio,
            _as_is,
        ),
        HostFormat(
            "gemini",
            "Gemini CLI",
            "json",
            "mcpServers",
            {"user": _in_home(".gemini", "settings.json"), "project": _in_project(".gemini", "settings.json")},
            _stdio,
            _gemini_read,  # its note (folder trust) is `gemini_trust`'s
        ),
        HostFormat(
            "opencode",
            "opencode",
            "json",
            "mcp",
            {"user": _opencode_user, "project": _in_project("opencode.json")},
            _opencode_entry,
            _opencode_read,
            starts_with={"$schema": "https://opencode.ai/config.json"},
        ),
    )
}
