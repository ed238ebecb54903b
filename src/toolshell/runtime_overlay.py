"""The runtime overlay of each session, as the `runtime` built-in asks for it
(`builtin.host.OverlayHandle`): switch a server off or on, show one tool a server's filter hides.

It never widens what the config and the session's role allow: only servers the role makes active
can be named, and only a server whose config says `runtime_unlock` shows a filtered tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from toolshell.config import Config, ServerConfig
from toolshell.connections.base import ServerStatus, SessionContext
from toolshell.connections.manager import ConnectionManager
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.filters import active_servers
from toolshell.registry.overlay import Overlays
from toolshell.routing import ServerRouter

if TYPE_CHECKING:
    from toolshell.session import Session


class RuntimeOverlay:
    """One host's per-session switches.

    Args:
        config: the host's config (servers and roles).
        manager: opens servers, to list a server's tools before showing one.
        connections: builds a session's context for that listing.
        overlays: where the switches are kept.
        sessions: the host's live sessions by id (for their roles).
        statuses: every server's state, redacted.
    """

    def __init__(
        self,
        config: Config,
        manager: ConnectionManager,
        connections: ServerRouter,
        overlays: Overlays,
        sessions: Mapping[str, Session],
        statuses: Callable[[], list[ServerStatus]],
    ) -> None:
        self.config = config
        self.manager = manager
        self.connections = connections
        self.overlays = overlays
        self.sessions = sessions
        self.statuses = statuses

    def statuses_for(self, session_id: str) -> list[ServerStatus]:
        active = {s.name for s in self._active(session_id)}
        return [s for s in self.statuses() if s.name in active]

    def set_enabled(self, session_id: str, server: str, enabled: bool) -> None:
        self._active_server(session_id, server)
        self.overlays.set_enabled(session_id, server, enabled)

    def enabled_for(self, session_id: str) -> dict[str, bool]:
        disabled = self.overlays.disabled(session_id)
        return {s.name: s.name not in disabled for s in self._active(session_id)}

    async def set_tool_unlocked(self, session_id: str, server: str, tool: str, unlocked: bool) -> None:
        """Show one tool that the server's `tools` filter hides (seed 001's runtime overlay).

        Only for a server the session's role makes active and whose config says `runtime_unlock`;
        the role's `allowed_tools` still applies to the shown tool.
        """
        config = self._active_server(session_id, server)
        if unlocked and not config.runtime_unlock:
            raise ToolshellError(
                ErrorCode.DENIED,
                f"server {server!r} does not let a session show its filtered tools; a person can add "
                f"{tool!r} to its `tools` list, or set `runtime_unlock = true` on it in the config",
            )
        conn = await self.manager.get(server)
        session = self.sessions.get(session_id)
        context = self.connections.context(session, config) if session else SessionContext(session_id=session_id)
        tools = [t.name for t in await conn.list_tools(context)]
        if tool not in tools:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"server {server!r} has no tool {tool!r}; it has: {', '.join(tools)}"
            )
        self.overlays.set_unlocked(session_id, server, tool, unlocked)

    def _active(self, session_id: str) -> list[ServerConfig]:
        """The servers a session's role makes active (an unknown session: the config's role)."""
        session = self.sessions.get(session_id)
        return active_servers(self.config, session.role if session is not None else self.config.role)

    def _active_server(self, session_id: str, server: str) -> ServerConfig:
        active = self._active(session_id)
        config = next((s for s in active if s.name == server), None)
        if config is None:
            names = ", ".join(s.name for s in active)
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"no server {server!r} for this session; its servers are: {names}"
            )
        return config
