"""Where a session's tool lists and calls go: the connection of each server, with the session
context that server is told (seed 001, "Session Context").

`ServerRouter` is the registry's `ToolSource` (catalog building) and, per session, the pipeline's
`CallTarget` (the one call on the connection). Calls to one server wait their turn past its
`max_concurrent_calls` (one limit per server, shared by every session), so a script's
`while read …; do tools … & done` cannot flood it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import anyio

from toolshell.calls.prepare import PreparedCall
from toolshell.config import Config, ServerConfig
from toolshell.connections.base import CallOptions, SessionContext
from toolshell.connections.manager import ConnectionManager
from toolshell.connections.remembered import RememberedTools
from toolshell.registry.entry import ToolEntry, entry_from_tool
from toolshell.registry.filters import configured_servers, role_allows, tool_allowed
from toolshell.registry.overlay import Overlays

if TYPE_CHECKING:
    from toolshell.session import Session

_DEFAULT_TURNS: int = ServerConfig.model_fields["max_concurrent_calls"].default
"""For a server added at run time, without its own `[[mcp.servers]]` entry."""


class ServerRouter:
    """The host's connections, as the catalog and the calls of a session see them."""

    def __init__(
        self,
        config: Config,
        manager: ConnectionManager,
        overlays: Overlays,
        top_level: Any,
        remembered: RememberedTools | None = None,
    ) -> None:
        self.config = config
        self.manager = manager
        self.remembered = remembered
        self.overlays = overlays
        self.top_level = top_level
        self._servers = {s.name: s for s in configured_servers(config) if s.enabled}
        self._turns: dict[str, anyio.Semaphore] = {}

    # --- ToolSource ----------------------------------------------------------------------------

    def state(self, server: str) -> str | None:
        conn = self.manager.connection(server)
        return None if conn is None else str(conn.status().state)

    def last_error(self, server: str) -> str | None:
        conn = self.manager.connection(server)
        return None if conn is None else conn.status().last_error

    async def list_tools(self, server: ServerConfig, session: Session) -> list[Any]:
        conn = self.manager.connection(server.name)
        assert conn is not None  # `state` said it has one
        return await conn.list_tools(self.context(session, server))

    def recall(self, server: ServerConfig) -> list[Any] | None:
        """The server's remembered list (`connections.remembered`), read without starting it."""
        return None if self.remembered is None else self.remembered.recall(server)

    async def top_level_entries(self) -> list[ToolEntry]:
        """The built-in web-fetch tool: toolshell's own static list, the same for every session."""
        if not self.config.web_fetch.enabled:
            return []
        await self.top_level.start()
        return [entry_from_tool(None, t, True) for t in await self.top_level.list_tools(SessionContext())]

    def list_stamp(self, server: ServerConfig, session: Session) -> int | None:
        conn = self.manager.connection(server.name)
        return None if conn is None else conn.list_stamp(session.context)

    def recall_stamp(self, server: ServerConfig) -> object:
        return None if self.remembered is None else self.remembered.stamp(server)

    # --- calls ---------------------------------------------------------------------------------

    def server_config(self, name: str) -> ServerConfig | None:
        return self._servers.get(name)

    def context(self, session: Session, server: ServerConfig) -> SessionContext:
        """The session context a server sees: `shell` says whether this session may call its `shell` tool."""
        return self.context_for(session.context, session.role, server, self.shell_unlocked(session, server))

    def shell_unlocked(self, session: Session, server: ServerConfig) -> bool:
        """Whether the session showed the server's `shell` tool despite its `tools` filter (`runtime`)."""
        return (server.name, "shell") in self.overlays.unlocked(session.id)

    def context_for(
        self, context: SessionContext, role_name: str | None, server: ServerConfig, unlocked: bool
    ) -> SessionContext:
        """`context` as `server` sees it, from what it depends on (the role, the unlock)."""
        role = self.config.role_named(role_name)
        may = (tool_allowed("shell", server.tools) or unlocked) and role_allows(role, server.name, "shell")
        return context if context.shell == may else dataclasses.replace(context, shell=may)

    def turns(self, server: str) -> anyio.Semaphore:
        """The semaphore of calls in flight to `server` (made on first use, inside the event loop)."""
        if server not in self._turns:
            config = self._servers.get(server)
            limit = _DEFAULT_TURNS if config is None else config.max_concurrent_calls
            self._turns[server] = anyio.Semaphore(limit, fast_acquire=True)  # free: no trip round the loop
        return self._turns[server]

    def target(self, session: Session) -> SessionTarget:
        return SessionTarget(self, session)


class SessionTarget:
    """One session's `CallTarget`: the call on the server's connection, with its context and answerer."""

    def __init__(self, router: ServerRouter, session: Session) -> None:
        self.router = router
        self.session = session
        self._contexts: dict[str, tuple[tuple[SessionContext, str | None, bool], SessionContext]] = {}
        """Per server, the context last sent and what it was made from (the session's context, role
        and `shell` unlock), so a call in a loop does not make it again; any of them changed, it is made anew."""

    async def call(self, prepared: PreparedCall) -> Any:
        entry, session = prepared.entry, self.session
        if entry.server is None:
            conn, context = self.router.top_level, session.context
        else:
            # The connection starts (or restarts) itself when called; `get` only for its error.
            conn = self.router.manager.connection(entry.server) or await self.router.manager.get(entry.server)
            context = self._context(entry.server)
        options = CallOptions(session=context, answerer=session.answerer)
        if entry.server is None:  # the top-level tools run in-process
            return await conn.call_tool(entry.name, prepared.input, options)
        turns = self.router.turns(entry.server)
        try:
            turns.acquire_nowait()  # the common case: a free turn, taken without yielding to the loop
        except anyio.WouldBlock:
            await turns.acquire()  # wait for a call in flight to this server to end
        try:
            return await conn.call_tool(entry.name, prepared.input, options)
        finally:
            turns.release()

    def _context(self, server: str) -> SessionContext:
        router, session = self.router, self.session
        config = router.server_config(server)
        if config is None:
            return session.context
        made_from = (session.context, session.role, router.shell_unlocked(session, config))
        kept = self._contexts.get(server)
        if kept is not None and kept[0] == made_from:
            return kept[1]
        context = router.context_for(session.context, session.role, config, made_from[2])
        self._contexts[server] = (made_from, context)
        return context
