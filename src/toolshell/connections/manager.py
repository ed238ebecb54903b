"""`ConnectionManager`: one connection per enabled configured server.

`start_all()` opens the `load = "startup"` servers concurrently, each bounded by its own startup
timeout, so one slow or broken server never holds up or breaks the others. An `on_demand` server
is opened by `get()` on first use (concurrent first uses share one attempt). `aclose()` closes
everything concurrently inside a shielded scope with a bounded wait.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio

from toolshell.config import ServerConfig
from toolshell.connections.base import ConnState, ServerStatus
from toolshell.connections.client_conn import ClientConnection
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.targets import BuiltinFactory
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.telemetry.context import SpanParent, child_span

logger = logging.getLogger(__name__)

LoadProgress = Callable[[str, ConnState], Any]
"""`on_progress(server, state)`: CONNECTING when a start begins, then READY or FAILED."""

CLOSE_GRACE = 15.0
"""Longest `aclose()` waits for all servers together (each stdio shutdown is bounded by ~6 s)."""


class ConnectionManager:
    """The host's connections, by server name."""

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        builtins: Mapping[str, BuiltinFactory] | None = None,
        *,
        connect: Callable[[ServerConfig, BuiltinFactory | None], ClientConnection] | None = None,
        auth: AuthSetup | None = None,
    ) -> None:
        """Args:
        servers: The configured servers; disabled ones are listed but never opened.
        builtins: Factories of the in-process servers, by server name (the host resolves them).
        connect: Builds one connection (tests swap it to pass a fake clock or a mode).
        auth: Where OAuth tokens live (the host's `<state dir>/oauth`) and who answers a login.
        """
        builtins = builtins or {}
        if connect is None:
            connect = functools.partial(make_connection, auth=auth)
        self._configs = {s.name: s for s in servers}
        self.telemetry: SpanParent | None = None  # telemetry: set by the host when tracing is on
        self._connections: dict[str, ClientConnection] = {
            s.name: connect(s, builtins.get(s.name)) for s in servers if s.enabled
        }
        self.on_tools_changed: Callable[[str], object] | None = None
        for conn in self._connections.values():
            conn.on_tools_changed = self._tools_changed

    def names(self) -> list[str]:
        return list(self._configs)

    def connection(self, name: str) -> ClientConnection | None:
        """The connection object, without opening it (None for unknown or disabled servers)."""
        return self._connections.get(name)

    async def get(self, name: str) -> ClientConnection:
        """The open connection to `name`, opening it on first use. Raises ToolshellError."""
        conn = self._connections.get(name)
        if conn is None:
            if name in self._configs:
                raise ToolshellError(
                    ErrorCode.UNAVAILABLE, f"server {name!r} is disabled; set enabled = true for it in the config"
                )
            known = ", ".join(sorted(self._configs)) or "none"
            raise ToolshellError(ErrorCode.UNAVAILABLE, f"no server is named {name!r} (configured: {known})")
        with self._traced_start(conn):  # telemetry
            await conn.start()
        return conn

    async def start_all(
        self, on_progress: LoadProgress | None = None, only: Collection[str] | None = None
    ) -> list[ServerStatus]:
        """Open every `load = "startup"` server (of `only`, when given) concurrently; failures are
        recorded, never raised."""

        async def open_one(conn: ClientConnection) -> None:
            await _report(on_progress, conn.name, ConnState.CONNECTING)
            try:
                with self._traced_start(conn):  # telemetry
                    await conn.start()
            except ToolshellError as e:
                logger.info("server %r did not start: %s", conn.name, e.message)
            await _report(on_progress, conn.name, conn.status().state)

        async with anyio.create_task_group() as tg:
            for conn in self._connections.values():
                if conn.server.load == "startup" and (only is None or conn.name in only):
                    tg.start_soon(open_one, conn)
        return self.statuses()

    def _traced_start(self, conn: ClientConnection) -> AbstractContextManager[None]:
        """telemetry: a span for a server that is really starting (nothing when tracing is off)."""
        if self.telemetry is None or conn.status().state == ConnState.READY:
            return nullcontext()
        return child_span("toolshell.server.start", {"toolshell.server": conn.name}, self.telemetry)

    def statuses(self) -> list[ServerStatus]:
        """Every configured server in config order; disabled ones as DISABLED."""
        out = []
        for name, cfg in self._configs.items():
            conn = self._connections.get(name)
            if conn is None:
                out.append(ServerStatus(name=name, type=cfg.type, state=ConnState.DISABLED, load=cfg.load))
            else:
                out.append(conn.status())
        return out

    def cancel_session(self, session_id: str) -> int:
        """A session ended: its open questions on every server are answered `cancel`."""
        return sum(conn.cancel_session(session_id) for conn in self._connections.values())

    async def aclose(self) -> None:
        """Close every connection concurrently; bounded, and immune to the caller's cancellation."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE):
            async with anyio.create_task_group() as tg:
                for conn in self._connections.values():
                    tg.start_soon(conn.close)

    async def __aenter__(self) -> ConnectionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _tools_changed(self, server: str) -> None:
        if self.on_tools_changed is not None:
            self.on_tools_changed(server)


async def _report(on_progress: LoadProgress | None, server: str, state: ConnState) -> None:
    if on_progress is None:
        return
    try:
        outcome = on_progress(server, state)
        if hasattr(outcome, "__await__"):
            await outcome
    except Exception:
        logger.exception("the loading display failed for %r", server)
