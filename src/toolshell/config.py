"""Configuration: pydantic models, TOML loading, `${VAR}` expansion, and other hosts' JSON.

A config file is TOML (`toolshell.toml`) or another MCP host's `{"mcpServers": {...}}` JSON
(desktop apps, IDEs, `.mcp.json`; VS Code's `servers` key too). Every mistake is reported with its
place (server name and key) and what to write instead; nothing half-loads.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolshell.errors import ConfigError
from toolshell.scripts.triggers import TriggerConfig

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ServerConfig(_Model):
    """One `[[mcp.servers]]` entry."""

    name: str
    type: Literal["builtin", "stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    module: str | None = None
    """For a user's own built-in server: `package.module:attribute` (an MCPServer, or a factory)."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    startup_timeout_seconds: float = Field(default=30.0, gt=0)
    tools: list[str] = Field(default_factory=list)
    auto_bind: list[str] = Field(default_factory=list)
    load: Literal["startup", "on_demand"] = "startup"
    trusted: bool = True
    enabled: bool = True

    @field_validator("name")
    @classmethod
    def _name_is_a_word(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a usable server name; use letters, digits, '-' and '_' (e.g. 'github')")
        return v

    @field_validator("tools")
    @classmethod
    def _patterns_are_exact_or_trailing_star(cls, v: list[str]) -> list[str]:
        for p in v:
            if "*" in p[:-1]:
                raise ValueError(f"tool pattern {p!r} has a '*' before its end; only a trailing '*' is allowed")
        return v

    @model_validator(mode="after")
    def _fields_fit_type(self) -> ServerConfig:
        if self.type == "stdio" and not self.command:
            raise ValueError(f'a stdio server needs `command`, e.g. command = "npx" (server {self.name!r})')
        if self.type == "http":
            if not self.url:
                raise ValueError(f'an http server needs `url`, e.g. url = "http://127.0.0.1:8000/mcp" ({self.name!r})')
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.type == "builtin" and self.command:
            raise ValueError('a builtin server runs in-process and takes no `command`; use type = "stdio"')
        misplaced = [key for key in _KEYS_OF_OTHER_TYPES[self.type] if getattr(self, key)]
        if misplaced:
            keys = ", ".join(f"`{k}`" for k in misplaced)
            raise ValueError(f"{keys} do(es) not apply to a {self.type} server; remove it or change `type`")
        return self


_KEYS_OF_OTHER_TYPES = {
    "stdio": ("url", "headers", "module"),
    "http": ("command", "args", "env", "cwd", "module"),
    "builtin": ("args", "env", "cwd", "url", "headers"),
}


def _check_patterns(patterns: list[str]) -> list[str]:
    """`server:tool` patterns of `[approval]` and `[[guard]]`, checked by the same parser policy uses."""
    from toolshell.policy.patterns import parse_pattern

    for pattern in patterns:
        try:
            parse_pattern(pattern)
        except ConfigError as e:
            raise ValueError(e.problems[0][1]) from None
    return patterns


class McpSection(_Model):
    servers: list[ServerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> McpSection:
        seen: set[str] = set()
        for s in self.servers:
            if s.name in seen:
                raise ValueError(f"server name {s.name!r} is used twice; give each [[mcp.servers]] its own name")
            seen.add(s.name)
        return self


class RoleMcp(_Model):
    server_refs: list[str] = Field(default_factory=list)
    allowed_tools: list[str] = Field(default_factory=list)
    """`server:tool` patterns, e.g. `"git:*"` or `"text_metrics:text_length"`."""


class RoleConfig(_Model):
    name: str
    system: str = ""
    welcome: str = ""
    mcp: RoleMcp = Field(default_factory=RoleMcp)


class ToolsInShellConfig(_Model):
    keep_visible: list[str] = Field(default_factory=list)
    manage_scripts: bool = False
    rate_unlabeled_tools: bool = True
    call_limit: int = Field(default=50, ge=1)
    max_output_bytes: int = Field(default=100_000, ge=1_000)


class ApprovalConfig(_Model):
    mode: Literal["off", "normal", "strict"] = "normal"
    require: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    inline: bool = False
    rater: Literal["heuristic", "command", "none"] = "heuristic"
    rater_command: list[str] = Field(default_factory=list)

    @field_validator("require", "deny")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        return _check_patterns(v)

    @model_validator(mode="after")
    def _command_given(self) -> ApprovalConfig:
        if self.rater == "command" and not self.rater_command:
            raise ValueError('rater = "command" needs the program to run, e.g. rater_command = ["python", "rate.py"]')
        return self


class GuardConfig(_Model):
    """A config guardrail: calls to `tool` whose canonical JSON input matches `input` are denied."""

    tool: str
    input: str = ""
    message: str = "denied by a guard rule"

    @field_validator("tool")
    @classmethod
    def _pattern(cls, v: str) -> str:
        return _check_patterns([v])[0]

    @field_validator("input")
    @classmethod
    def _regex_compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"input {v!r} is not a valid regular expression: {e}") from None
        return v


class MountConfig(_Model):
    host: str
    path: str
    writable: bool = False

    @field_validator("host")
    @classmethod
    def _host_folder_exists(cls, v: str) -> str:
        if not Path(v).expanduser().is_dir():
            raise ValueError(f"host folder {v!r} does not exist; create it or fix the path")
        return str(Path(v).expanduser())

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f'path {v!r} must be absolute inside the shell, e.g. "/data"')
        return v


class ShellConfig(_Model):
    timeout_seconds: float = Field(default=300.0, gt=0)
    max_commands: int = Field(default=100_000, ge=1)
    max_loop_iterations: int = Field(default=100_000, ge=1)
    mounts: list[MountConfig] = Field(default_factory=list)
    network_allow: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    """Names of host environment variables the shell may see."""


class WebFetchConfig(_Model):
    enabled: bool = True
    allow_private: list[str] = Field(default_factory=list)
    """Hosts (or `host:port`) on private, loopback or link-local addresses that web-fetch may reach."""
    max_bytes: int = Field(default=200_000, ge=1_000)
    timeout_seconds: float = Field(default=30.0, gt=0)


class StateConfig(_Model):
    dir: str | None = None


class Config(_Model):
    """The whole configuration. `Config()` is the embedded default: built-in servers only."""

    mcp: McpSection = Field(default_factory=McpSection)
    roles: list[RoleConfig] = Field(default_factory=list)
    tools_in_shell: ToolsInShellConfig = Field(default_factory=ToolsInShellConfig)
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    guard: list[GuardConfig] = Field(default_factory=list)
    shell: ShellConfig = Field(default_factory=ShellConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    triggers: list[TriggerConfig] = Field(default_factory=list)
    role: str | None = None
    """The role sessions use unless they name one."""
    include_builtins: bool = True
    """Add the shipped built-in servers that the file does not declare itself."""

    def reference_problems(self) -> list[tuple[str, str]]:
        """References that name nothing: a role's `server_refs`, the default `role`."""
        names = {s.name for s in self.mcp.servers}
        problems = [
            (
                f"roles[{role.name}].mcp.server_refs",
                f"role {role.name!r} refers to server {ref!r}, which no [[mcp.servers]] declares; "
                f"add a [[mcp.servers]] entry named {ref!r} or remove the reference",
            )
            for role in self.roles
            for ref in role.mcp.server_refs
            if ref not in names and not _is_shipped_builtin(ref)
        ]
        if self.role and self.role not in {r.name for r in self.roles}:
            problems.append(("role", f"role = {self.role!r} names no [[roles]] entry"))
        role_names = [r.name for r in self.roles]
        problems += [
            (f"roles[{n}]", f"role {n!r} is defined twice; a role is one [[roles]] entry (merge the two)")
            for n in sorted({n for n in role_names if role_names.count(n) > 1})
        ]
        return problems

    def warnings(self) -> list[tuple[str, str]]:
        """Settings that load but probably do not do what was meant (shown by `config validate`)."""
        from toolshell.builtin import SHIPPED
        from toolshell.registry.filters import role_problems

        found = [("roles", p) for p in role_problems(self)]
        found += [
            (
                f"mcp.servers[{s.name}]",
                f"no shipped built-in server is named {s.name!r} ({', '.join(SHIPPED)}); add "
                '`module = "package.module:attr"`, or pass it to Host(servers=...) from Python',
            )
            for s in self.mcp.servers
            if s.type == "builtin" and not s.module and s.name not in SHIPPED
        ]
        return found

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.mcp.servers if s.name == name), None)

    def role_named(self, name: str | None) -> RoleConfig | None:
        return next((r for r in self.roles if r.name == name), None) if name else None


def _is_shipped_builtin(name: str) -> bool:
    from toolshell.builtin import SHIPPED

    return name in SHIPPED


# --- expansion ---------------------------------------------------------------------------------


def expand_vars(value: str, env: Mapping[str, str], place: str) -> str:
    """Expand `${VAR}` and `${VAR:-default}`; an undefined `${VAR}` is an error naming it and the place."""

    def sub(m: re.Match[str]) -> str:
        name, has_default, default = m.group(1), m.group(2), m.group(3)
        if name in env and (env[name] != "" or not has_default):
            return env[name]
        if has_default is not None:
            return default or ""
        raise ConfigError([(place, f"${{{name}}} is not set; export {name}=… or write ${{{name}:-default}}")])

    return _VAR_RE.sub(sub, value)


def _expand_tree(data: Any, env: Mapping[str, str], place: str) -> Any:
    if isinstance(data, str):
        return expand_vars(data, env, place)
    if isinstance(data, list):
        return [_expand_tree(v, env, place) for v in data]
    if isinstance(data, dict):
        return {k: _expand_tree(v, env, f"{place}.{k}" if place else k) for k, v in data.items()}
    return data


def _expand_servers(raw: dict[str, Any], env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Expand variables in every server in place; collect each failure instead of stopping at one."""
    problems: list[tuple[str, str]] = []
    servers = raw.get("mcp", {}).get("servers", []) if isinstance(raw.get("mcp"), dict) else []
    for i, server in enumerate(servers if isinstance(servers, list) else []):
        if not isinstance(server, dict):
            continue
        label = f"mcp.servers[{server.get('name', i)}]"
        for key in ("command", "args", "env", "cwd", "url", "headers"):
            if key in server:
                try:
                    server[key] = _expand_tree(server[key], env, f"{label}.{key}")
                except ConfigError as e:
                    problems.extend(e.problems)
    return problems


# --- loading -----------------------------------------------------------------------------------


def _place(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """Turn a pydantic error location into `mcp.servers[github].url` using the server's name."""
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int) and isinstance(node, list) and item < len(node):
            elem = node[item]
            label = elem.get("name", item) if isinstance(elem, dict) else item
            parts[-1] = f"{parts[-1]}[{label}]" if parts else f"[{label}]"
            node = elem
            continue
        parts.append(str(item))
        node = node.get(item) if isinstance(node, dict) else None
    return ".".join(p for p in parts if p and not p.startswith("function-") and p not in {"str", "list"})


_HINTS = {
    "extra_forbidden": "unknown key; check its spelling against the configuration reference",
    "missing": "this key is required",
}


def _known_keys() -> set[str]:
    keys: set[str] = set()
    models: list[type[BaseModel]] = [Config]
    while models:
        model = models.pop()
        for name, field in model.model_fields.items():
            keys.add(name)
            args = [field.annotation, *getattr(field.annotation, "__args__", ())]
            models += [a for a in args if isinstance(a, type) and issubclass(a, BaseModel) and a is not model]
    return keys


def _unknown_key(loc: tuple[Any, ...]) -> str:
    import difflib

    near = difflib.get_close_matches(str(loc[-1]), sorted(_known_keys()), n=1)
    hint = f"; did you mean `{near[0]}`?" if near else "; check its spelling against the configuration reference"
    return f"unknown key `{loc[-1]}`{hint}"


def _problems_from(err: ValidationError, raw: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for e in err.errors():
        msg = _HINTS.get(e["type"]) or e["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
        if e["type"] == "extra_forbidden":
            msg = _unknown_key(tuple(e["loc"]))
        if e["type"] == "literal_error":
            msg = f"{e['msg'].replace('Input should be', 'must be')} (you wrote {e['input']!r})"
        out.append((_place(tuple(e["loc"]), raw), msg))
    return out


def parse_config(
    raw: dict[str, Any], *, env: Mapping[str, str] | None = None, source: str = "", expand: bool = True
) -> Config:
    """Validate a decoded config (TOML tables or imported JSON) into a `Config`, or raise `ConfigError`.

    `expand=False` keeps `${VAR}` as written (for converting a file without reading any secret).
    """
    if "mcpServers" in raw or ("servers" in raw and "mcp" not in raw):
        raw = import_mcp_json(raw, source=source)
    raw = json.loads(json.dumps(raw))  # a private copy: expansion writes into it
    problems = _expand_servers(raw, os.environ if env is None else env) if expand else []
    try:
        config = Config.model_validate(raw)
    except ValidationError as e:
        problems.extend(_problems_from(e, raw))
        raise ConfigError(problems, source) from None
    problems.extend(config.reference_problems())
    if problems:
        raise ConfigError(problems, source)
    return config


def import_mcp_json(data: dict[str, Any], *, source: str = "") -> dict[str, Any]:
    """Convert another host's `{"mcpServers": {name: {...}}}` (or VS Code's `servers`) to our tables."""
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict):
        raise ConfigError([("mcpServers", "must be an object mapping server names to their settings")], source)
    out: list[dict[str, Any]] = []
    for name, spec in servers.items():
        if not isinstance(spec, dict):
            raise ConfigError([(f"mcpServers.{name}", "must be an object with `command` or `url`")], source)
        entry: dict[str, Any] = {"name": name}
        kind = spec.get("type", "")
        if "url" in spec or kind in ("http", "streamable-http", "streamableHttp", "sse"):
            entry.update(type="http", url=spec.get("url", ""), headers=spec.get("headers", {}))
        else:
            entry.update(type="stdio", command=spec.get("command", ""), args=spec.get("args", []))
            if spec.get("env"):
                entry["env"] = spec["env"]
            if spec.get("cwd"):
                entry["cwd"] = spec["cwd"]
        if spec.get("disabled"):
            entry["enabled"] = False
        out.append(entry)
    return {"mcp": {"servers": out}}


def load_text(text: str, *, source: str = "", env: Mapping[str, str] | None = None, expand: bool = True) -> Config:
    """Parse config text: JSON when it starts with `{`, TOML otherwise."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError([(f"line {e.lineno}", f"not valid JSON: {e.msg}")], source) from None
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError([("", f"not valid TOML: {e}")], source) from None
    if not isinstance(raw, dict):
        raise ConfigError([("", "the top level must be a table / object")], source)
    return parse_config(raw, env=env, source=source, expand=expand)


def load_file(path: str | Path, *, env: Mapping[str, str] | None = None, expand: bool = True) -> Config:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([("", f"cannot read the file: {e.strerror or e}")], str(p)) from None
    except UnicodeDecodeError as e:
        raise ConfigError([("", f"not UTF-8 text (byte {e.start}); save the file as UTF-8")], str(p)) from None
    return load_text(text, source=str(p), env=env, expand=expand)


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "toolshell"


def user_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "toolshell"


def find_config_path(explicit: str | None = None) -> Path | None:
    """`--config PATH`, then `$TOOLSHELL_CONFIG`, `./toolshell.toml`, the user config dir; else None."""
    if explicit:
        return Path(explicit)
    if env_path := os.environ.get("TOOLSHELL_CONFIG"):
        return Path(env_path)
    for candidate in (Path("toolshell.toml"), user_config_dir() / "toolshell.toml"):
        if candidate.is_file():
            return candidate
    return None


def load(explicit: str | None = None) -> Config:
    """Load the config the CLI would use; the embedded default when there is no file."""
    path = find_config_path(explicit)
    return load_file(path) if path else Config()


def state_dir(config: Config, explicit: str | None = None) -> Path:
    """`--state-dir`, `$TOOLSHELL_STATE_DIR`, `[state] dir`, then the user data dir."""
    chosen = explicit or os.environ.get("TOOLSHELL_STATE_DIR") or config.state.dir
    return Path(chosen).expanduser() if chosen else user_data_dir()


def to_toml(config: Config) -> str:
    """Write the servers of a config as TOML (what `toolshell config import` prints)."""
    lines: list[str] = []
    for s in config.mcp.servers:
        lines.append("[[mcp.servers]]")
        dumped = s.model_dump(exclude_defaults=True)
        dumped.setdefault("type", s.type)
        for key in ("name", "type", *[k for k in dumped if k not in ("name", "type")]):
            value = dumped[key]
            if isinstance(value, dict):
                inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {inner} }}")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)
