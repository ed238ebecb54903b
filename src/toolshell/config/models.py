"""Configuration: the pydantic models of `toolshell.toml`. `Config()` is the embedded default.

A config file is TOML (`toolshell.toml`) or another MCP host's `{"mcpServers": {...}}` JSON
(desktop apps, IDEs, `.mcp.json`; VS Code's `servers` key too); reading it is `config.loading`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from toolshell.config.base import _YEAR, _Model
from toolshell.config.names import SERVER_NAME_RE
from toolshell.config.oauth import OAuthConfig
from toolshell.config.operator import AuditConfig, LimitRule, QuotaRule, ScanConfig
from toolshell.config.patterns import parse_pattern
from toolshell.config.serve import ServeConfig
from toolshell.config.triggers import TriggerConfig
from toolshell.errors import ConfigError
from toolshell.shipped import SHIPPED

_COUNT = 1_000_000_000
"""The largest count a setting may be: the shell's limits are fixed-size integers."""


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
    timeout_seconds: float = Field(default=30.0, gt=0, le=_YEAR)
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=_YEAR)
    max_message_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, le=2**40)
    """The largest message a stdio server may send; a larger answer fails its call, not the server."""
    tools: list[str] = Field(default_factory=list)
    auto_bind: list[str] = Field(default_factory=list)
    load: Literal["startup", "on_demand"] = "startup"
    trusted: bool = True
    runtime_unlock: bool = False
    """Let a session show one of this server's filtered-out tools with `tools runtime mcp action=enable
    server=S tool=T` (seed 001's runtime overlay). Off: the overlay never widens the `tools` filter."""
    enabled: bool = True
    protocol: Literal["auto", "2025-11-25"] = "auto"
    """"2025-11-25" forces the older handshake, for servers that ask with `ctx.elicit`/`elicit_url`."""
    oauth: OAuthConfig | None = None
    """For `http`: OAuth settings; absent means OAuth with defaults unless `headers` has Authorization."""
    max_concurrent_calls: int = Field(default=8, ge=1)
    send_workdir: bool | None = None
    """Send the host's working directory in the session context: default only to local servers
    (built-in, stdio, an HTTP server at a loopback address)."""
    """Calls in flight to this server at once, from every session together; more wait their turn."""
    max_tools: int = Field(default=10_000, ge=1, le=1_000_000)
    """The most tools kept from this server's listing; the rest (and the pages after them) are dropped, with a note."""
    audit: bool = True
    """False: its nested calls stay out of the `[audit]` trail (a noisy read-only server)."""
    scan_results: bool = True
    """Mask credential shapes (cloud keys, tokens, JWTs, private keys) in its results (`[scan]`)."""
    _folder: Path | None = PrivateAttr(default=None)

    @property
    def folder(self) -> Path | None:
        """The folder of the (trusted) config file that declared this server, where its `module` is
        also looked for; set by `config.load`."""
        return self._folder

    def declared_in(self, folder: Path) -> None:
        self._folder = folder

    @field_validator("name")
    @classmethod
    def _name_is_a_word(cls, v: str) -> str:
        if not SERVER_NAME_RE.fullmatch(v):
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
    "stdio": ("url", "headers", "module", "oauth"),
    "http": ("command", "args", "env", "cwd", "module"),
    "builtin": ("args", "env", "cwd", "url", "headers", "oauth"),
}


def _check_patterns(patterns: list[str]) -> list[str]:
    """`server:tool` patterns of `[approval]` and `[[guard]]`, checked by the same parser policy uses."""
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
    call_limit: int = Field(default=50, ge=1, le=_COUNT)
    max_output_bytes: int = Field(default=30_000, ge=1_000, le=_COUNT)
    """Cap on a shell call's stdout and on its stderr, in UTF-8 bytes; the rest is saved to a file."""
    max_result_bytes: int = Field(default=30_000_000, ge=64 * 1024, le=30_000_000)
    """Memory guard on one `tools` result inside the shell. At most 30 MB: the sandbox keeps at most
    32,000,000 bytes in flight, and a result past that would abort the whole script."""
    output_files_max_bytes: int = Field(default=32 * 1024 * 1024, ge=1024 * 1024, le=64 * 1024 * 1024)
    """Total size of a session's `tool-output/` files (whole outputs past the cap); oldest removed first.
    At most 64 MiB: the sandbox's filesystem holds 100 MB in all."""


class ApprovalConfig(_Model):
    mode: Literal["off", "normal", "strict"] = "normal"
    require: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    inline: bool = False
    """Ask the person at the terminal on the spot. `toolshell serve` asks an upstream client that
    declared elicitation unless this is set to false."""
    wait_seconds: float = Field(default=900.0, gt=0)
    """How long a call waits for a person's answer before the script stops with the report."""
    park_after_seconds: float = Field(default=300.0, ge=0)
    """`toolshell serve`: a task that waited this long for a person's answer is parked: its run
    stops, its worker keeps nothing of it, and the answer (on any worker) resumes it by replay.
    0: never parked. Five minutes: a person who answers within it gets no replay, and a worker
    holds no memory for approvals that take hours."""
    wait_for: Literal["none", "store"] = "none"
    """"store": with nobody to ask on the spot, a call waits (up to `wait_seconds`) for an answer
    given in another process (`toolshell approvals grant`, the web page)."""
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
    timeout_seconds: float = Field(default=300.0, gt=0, le=_YEAR)
    max_commands: int = Field(default=100_000, ge=1, le=_COUNT)
    max_loop_iterations: int = Field(default=100_000, ge=1, le=_COUNT)
    mounts: list[MountConfig] = Field(default_factory=list)
    network_allow: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    """Names of host environment variables the shell may see."""
    replay_host_writes: bool = False
    """Resume by replay a run whose shell reaches the host (a writable mount, `network_allow`),
    knowing its writes there and its requests run again; off: such a run ends with its worker."""


class WebFetchConfig(_Model):
    enabled: bool = True
    allow_private: list[str] = Field(default_factory=list)
    """Hosts (or `host:port`) on private, loopback or link-local addresses that web-fetch may reach."""
    max_bytes: int = Field(default=200_000, ge=1_000, le=_COUNT)
    timeout_seconds: float = Field(default=30.0, gt=0, le=_YEAR)


class TelemetryConfig(_Model):
    """OpenTelemetry traces (`pip install 'toolshell[otel]'`); the standard `OTEL_*` variables apply too."""

    enabled: bool | None = None
    """True: trace; False: never; unset: trace when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set."""
    endpoint: str | None = None
    """The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); default: the `OTEL_*` variables'."""
    service_name: str = Field(default="toolshell", min_length=1, max_length=200)
    """The exported `service.name`; unset, `OTEL_SERVICE_NAME` wins over the default."""
    record_io: bool = False
    """Put each call's input and result on its span (redacted, cut to 1,000 characters)."""
    metrics: bool = True
    """Export metrics over OTLP/HTTP too whenever traces are exported (`OTEL_METRICS_EXPORTER=none` turns it off)."""
    prometheus_port: int | None = Field(default=None, ge=0, le=65535)
    """`toolshell serve` answers Prometheus scrapes on `GET /metrics` at this port (0: any free one)."""
    prometheus_host: str = "127.0.0.1"
    """The address of the Prometheus listener; a pod's scrape needs `0.0.0.0` (keep the port off the Service)."""
    prometheus_token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The variable holding the scrape token: set, `/metrics` answers only `Authorization: Bearer <token>`."""


class CliConfig(_Model):
    """The command line: `keep_warm` starts a daemon (`toolshell daemon`) on first use, so later
    commands in the same directory find their servers connected; it exits after `idle_seconds`."""

    keep_warm: bool = False
    idle_seconds: float = Field(default=1800.0, gt=0, le=_YEAR)


class StateConfig(_Model):
    """Where state is kept: `dir` (the local SQLite file and private files), and `url`, a
    `postgresql://` database every worker shares (`TOOLSHELL_STATE_URL` overrides it)."""

    dir: str | None = None
    url: str | None = None


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
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    limits: list[LimitRule] = Field(default_factory=list)
    quotas: list[QuotaRule] = Field(default_factory=list)
    scan: ScanConfig = Field(default_factory=ScanConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    cli: CliConfig = Field(default_factory=CliConfig)
    triggers: list[TriggerConfig] = Field(default_factory=list)
    role: str | None = None
    """The role sessions use unless they name one."""
    startup_wait_seconds: float = Field(default=5.0, ge=0, le=_YEAR)
    """How long opening the host waits for `startup` servers; slower ones go on starting meanwhile."""
    include_builtins: bool = True
    """Add the shipped built-in servers that the file does not declare itself."""
    secret_env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(default_factory=list)
    """Variables whose values are secrets whatever their names say (masked everywhere, `toolshell.redact`)."""
    _secrets: frozenset[str] = PrivateAttr(default_factory=frozenset)

    def set_secrets(self, values: Iterable[str]) -> None:
        """The expanded `${VAR}` values that must never be shown (see `toolshell.redact`)."""
        self._secrets = frozenset(values)

    @property
    def secrets(self) -> frozenset[str]:
        return self._secrets

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

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.mcp.servers if s.name == name), None)

    def role_named(self, name: str | None) -> RoleConfig | None:
        return next((r for r in self.roles if r.name == name), None) if name else None


def _is_shipped_builtin(name: str) -> bool:
    return name in SHIPPED


__all__ = [
    "ApprovalConfig",
    "CliConfig",
    "Config",
    "GuardConfig",
    "McpSection",
    "OAuthConfig",
    "MountConfig",
    "RoleConfig",
    "RoleMcp",
    "ServerConfig",
    "ServeConfig",
    "ShellConfig",
    "StateConfig",
    "ToolsInShellConfig",
    "TriggerConfig",
    "WebFetchConfig",
]
