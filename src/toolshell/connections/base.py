"""What every connection (built-in, stdio, Streamable HTTP) offers the host, and what a call carries."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types


@dataclass(frozen=True)
class SessionContext:
    """The calling session, sent to external servers (seed 001, "Session Context")."""

    session_id: str = ""
    role: str = ""
    spec: str = ""
    project: str = ""
    workdir: str = ""
    git: bool = False
    shell: bool = True
    context_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "spec": self.spec,
            "project": self.project,
            "session_id": self.session_id,
            "workdir": self.workdir,
            "git": self.git,
            "shell": self.shell,
            "context_epoch": self.context_epoch,
        }


class Answerer(Protocol):
    """Who answers a server's elicitation for a session: a terminal, an upstream client, or nobody."""

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult: ...


ProgressHook = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class CallOptions:
    """Per-call settings from the host. `timeout_seconds` None means the server's configured idle timeout."""

    session: SessionContext = field(default_factory=SessionContext)
    answerer: Answerer | None = None
    on_progress: ProgressHook | None = None
    timeout_seconds: float | None = None


class ConnState(enum.StrEnum):
    NOT_LOADED = "not_loaded"
    CONNECTING = "connecting"
    READY = "ready"
    NEEDS_AUTH = "needs_auth"
    """The server refused us (HTTP 401/403): a login (`toolshell auth login`) or credentials are missing."""
    FAILED = "failed"
    CLOSED = "closed"
    DISABLED = "disabled"


@dataclass
class ServerStatus:
    """What `toolshell servers` shows for one server."""

    name: str
    type: str
    state: ConnState
    load: str
    protocol_version: str | None = None
    tool_count: int | None = None
    last_error: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    restarts: int = 0
    auth_reason: str | None = None
    """For `needs_auth`: the server's `WWW-Authenticate` reason (error, description, scope)."""
    notes: list[str] = field(default_factory=list)
    """What was refused or skipped (tools with bad names, garbage lines from the server)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "state": str(self.state),
            "load": self.load,
            "protocol_version": self.protocol_version,
            "tool_count": self.tool_count,
            "last_error": self.last_error,
            "stderr_tail": self.stderr_tail,
            "restarts": self.restarts,
            "auth_reason": self.auth_reason,
            **({"notes": self.notes} if self.notes else {}),  # only when something was refused or skipped
        }


class Connection(Protocol):
    """One server. Errors are `ToolshellError`s (unavailable / connection_required / tool_error...)."""

    name: str

    async def start(self) -> None:
        """Connect (idempotent; concurrent callers share one attempt). Raises ToolshellError(unavailable)."""

    async def list_tools(self, session: SessionContext) -> list[types.Tool]:
        """The server's tools, from cache unless the server said `tools/list_changed` (or private scope)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], options: CallOptions) -> types.CallToolResult:
        """Call one tool with the idle timeout refreshed by progress and an absolute cap of 20 × idle."""

    async def close(self) -> None:
        """Close and release everything (stdio: close stdin, wait, terminate the process group)."""

    def status(self) -> ServerStatus: ...
