"""`Host`: owns the connections, the catalog, policy, state and timeline. The Python API.

async with Host.open() as host:                    # the embedded default
    result = await host.session().run("tools text-metrics text-length text=hello")
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from toolshell import config as config_mod
from toolshell.builtin import as_factory, resolve_builtin
from toolshell.config import Config, ServerConfig
from toolshell.connections.base import CallOptions, ConnState, ServerStatus, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.connections.manager import ConnectionManager
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.policy import Policy
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.registry.filters import active_servers, configured_servers, filter_entries, role_allows, tool_allowed
from toolshell.registry.validate import validate_input
from toolshell.session import Session
from toolshell.store import Store
from toolshell.timeline.sinks import EventSink, SqliteSink

logger = logging.getLogger(__name__)
_TOP_LEVEL = ServerConfig(name="toolshell-top-level", type="builtin", timeout_seconds=60)


class Host:
    """An MCP host. Use `Host.open(config)`; it starts the `load = "startup"` servers concurrently.

    Args:
        config: The configuration; None is the embedded default (built-in servers only).
        state_dir: Where the SQLite state lives (default: `[state] dir` or the user data dir).
        rater: A `policy.rating.Rater` for tools that declare nothing about their risk.
        guardrails: Extra `policy.guardrails.Guardrail`s run before and after every call.
        on_wait: Called with the servers still starting when opening waits longer than a second.
        servers: In-process servers by name (an `MCPServer`, a lowlevel `Server`, or a factory),
            added as `type = "builtin"` servers unless the config declares that name itself.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        state_dir: str | Path | None = None,
        store: Store | None = None,
        rater: Any = None,
        guardrails: Sequence[Any] = (),
        sink: EventSink | None = None,
        on_server_progress: Any = None,
        servers: dict[str, Any] | None = None,
        on_wait: Callable[[list[str], float], None] | None = None,
    ) -> None:
        self.config = _with_inproc(config or Config(), servers or {})
        self._inproc = dict(servers or {})
        self.state_dir = config_mod.state_dir(self.config, str(state_dir) if state_dir else None)
        self.store = store or Store(self.state_dir / "toolshell.db")
        self.sink: EventSink = sink or SqliteSink(self.store)
        self.policy = Policy(self.config, self.store, rater)
        for guard in guardrails:
            self.policy.guardrails.add(guard)
        self.project_id = _project_id(Path.cwd())
        configured = self._servers()
        builtins = {s.name: self._builtin_for(s) for s in configured if s.type == "builtin"}
        self.manager = ConnectionManager(configured, builtins)
        self._on_server_progress = on_server_progress
        self._on_wait = on_wait
        self._top = make_connection(_TOP_LEVEL, builtin=lambda: self._top_level_server())
        self._disabled: dict[str, set[str]] = {}
        self._unlocked: dict[str, set[tuple[str, str]]] = {}
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()

    @classmethod
    @asynccontextmanager
    async def open(cls, config: Config | str | Path | None = None, **kwargs: Any) -> AsyncIterator[Host]:
        """Open a host from a `Config`, a config file path, or nothing (the embedded default)."""
        if isinstance(config, str | Path):
            config = config_mod.load_file(config)
        host = cls(config, **kwargs)
        async with AsyncExitStack() as stack:
            stack.push_async_callback(host.aclose)
            starting = await stack.enter_async_context(anyio.create_task_group())
            await host._start_servers(starting)
            try:
                yield host
            finally:
                starting.cancel_scope.cancel()

    async def _start_servers(self, tg: anyio.abc.TaskGroup) -> None:
        """Start the `startup` servers concurrently; wait for them at most `startup_wait_seconds`.

        A server still starting after that keeps starting in the background: it is listed as
        starting, and a call that names it waits for it (up to its own startup timeout).
        """
        done = anyio.Event()

        async def start_all() -> None:
            try:
                await self.manager.start_all(self._on_server_progress)
            finally:
                done.set()

        tg.start_soon(start_all)
        wait = self.config.startup_wait_seconds
        with anyio.move_on_after(min(1.0, wait)):
            await done.wait()
        if not done.is_set() and wait > 1.0 and self._on_wait is not None:
            waiting = [s.name for s in self.statuses() if s.state == ConnState.CONNECTING]
            self._on_wait(waiting, wait)
        with anyio.move_on_after(max(0.0, wait - 1.0)):
            await done.wait()

    async def aclose(self) -> None:
        try:
            await self.manager.aclose()
            await self._top.close()
        finally:
            flush = getattr(self.sink, "flush", None)
            if flush is not None:
                flush()
            self.store.close()

    # --- servers -----------------------------------------------------------------------------

    def _servers(self) -> list[ServerConfig]:
        """Configured servers, plus the shipped built-ins the file does not declare itself."""
        return [s for s in configured_servers(self.config) if s.enabled]

    def _builtin_for(self, server: ServerConfig) -> Any:
        """A factory of the in-process server; resolving a `module` waits until the server opens."""
        if server.name in self._inproc:
            factory = as_factory(self._inproc[server.name], "Host(servers=...)", server.name)
            return lambda: factory(self)
        return lambda: resolve_builtin(server.name, server.module)(self)

    def _top_level_server(self) -> Any:
        from toolshell.builtin.web_fetch import create

        return create(self, config=self.config.web_fetch)

    def statuses(self) -> list[ServerStatus]:
        return self.manager.statuses()

    def set_enabled(self, session_id: str, server: str, enabled: bool) -> None:
        if server not in {s.name for s in self._servers()}:
            names = ", ".join(s.name for s in self._servers())
            raise ToolshellError(ErrorCode.INVALID_INPUT, f"no configured server {server!r}; configured: {names}")
        disabled = self._disabled.setdefault(session_id, set())
        (disabled.discard if enabled else disabled.add)(server)

    def disabled_for(self, session_id: str) -> set[str]:
        """The servers this session switched off with `runtime mcp action=disable`."""
        return set(self._disabled.get(session_id, set()))

    def enabled_for(self, session_id: str) -> dict[str, bool]:
        disabled = self._disabled.get(session_id, set())
        return {s.name: s.name not in disabled for s in self._servers()}

    async def set_tool_unlocked(self, session_id: str, server: str, tool: str, unlocked: bool) -> None:
        """The runtime overlay (seed 001): show one tool that the server's `tools` filter hides."""
        config = next((s for s in self._servers() if s.name == server), None)
        if config is None:
            names = ", ".join(s.name for s in self._servers())
            raise ToolshellError(ErrorCode.INVALID_INPUT, f"no configured server {server!r}; configured: {names}")
        conn = await self.manager.get(server)
        session = self._sessions.get(session_id)
        context = self.server_context(session, config) if session else SessionContext(session_id=session_id)
        tools = [t.name for t in await conn.list_tools(context)]
        if tool not in tools:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"server {server!r} has no tool {tool!r}; it has: {', '.join(tools)}"
            )
        shown = self._unlocked.setdefault(session_id, set())
        (shown.add if unlocked else shown.discard)((server, tool))

    def server_context(self, session: Session, server: ServerConfig) -> SessionContext:
        """The session context a server sees: `shell` says whether this session may call its `shell` tool."""
        role = self.config.role_named(session.role)
        unlocked = (server.name, "shell") in self._unlocked.get(session.id, set())
        may = (tool_allowed("shell", server.tools) or unlocked) and role_allows(role, server.name, "shell")
        return dataclasses.replace(session.context, shell=may)

    async def load_server(self, name: str) -> None:
        """Open a server (an `on_demand` one on first use)."""
        await self.manager.get(name)

    # --- catalog -----------------------------------------------------------------------------

    async def catalog(self, session: Session | None = None) -> Catalog:
        """The tools this session can call now. Rebuilt at the start of every shell call."""
        session = session or self.session()
        role = self.config.role_named(session.role)
        disabled = self._disabled.get(session.id, set())
        infos: list[ServerInfo] = []
        entries: list[ToolEntry] = []
        for server in active_servers(self.config, session.role):
            if server.name in disabled:
                continue
            tools, info = await self._server_tools(server, session)
            shown = filter_entries(tools, server, role)
            unlocked = self._unlocked.get(session.id, set())
            shown += [
                e for e in filter_entries(tools, None, role) if (server.name, e.name) in unlocked and e not in shown
            ]
            infos.append(dataclasses.replace(info, tool_count=len(shown)) if info.loaded else info)
            entries += shown
        return Catalog(infos, entries, await self._top_level_entries(session))

    async def _server_tools(self, server: ServerConfig, session: Session) -> tuple[list[ToolEntry], ServerInfo]:
        conn = self.manager.connection(server.name)
        if conn is None:
            return [], ServerInfo(server.name, loaded=False, tool_count=0, state="disabled")
        state = conn.status().state
        if state == ConnState.NOT_LOADED:
            return [], ServerInfo(server.name, loaded=False, tool_count=0, state=str(state))
        if state != ConnState.READY:
            # Not retried here: a broken server must not slow every shell call. A call that names it
            # retries (with backoff), see `ShellCall._resolve`.
            return [], ServerInfo(server.name, loaded=True, tool_count=0, state=str(state))
        try:
            tools = await conn.list_tools(self.server_context(session, server))
        except ToolshellError:
            return [], ServerInfo(server.name, loaded=True, tool_count=0, state="failed")
        entries = [_entry(server.name, t, server.trusted) for t in tools]
        return entries, ServerInfo(server.name, loaded=True, tool_count=len(entries), state="ready")

    async def _top_level_entries(self, session: Session) -> list[ToolEntry]:
        if not self.config.web_fetch.enabled:
            return []
        await self._top.start()
        return [_entry(None, t, True) for t in await self._top.list_tools(session.context)]

    async def visible_tools(self, session: Session | None = None) -> list[ToolEntry]:
        """The `keep_visible` tools (flat or plain names, hyphens and underscores alike), lazy ones loaded.

        They stay callable from the shell too. Names that match no tool are logged, not fatal.
        """
        from toolshell.registry.naming import fold, parse_flat_name

        names = self.config.tools_in_shell.keep_visible
        for name in names:
            server, _ = parse_flat_name(name)
            if server is not None and server in {s.name for s in self._servers()}:
                try:
                    await self.load_server(server)
                except ToolshellError as e:
                    logger.warning("keep_visible %s: %s", name, e.message)
        wanted = {fold(n) for n in names}
        found = [e for e in await self.list_tools(session) if fold(e.flat_name) in wanted or fold(e.name) in wanted]
        missing = wanted - {fold(e.flat_name) for e in found} - {fold(e.name) for e in found}
        for name in sorted(missing):
            logger.warning("keep_visible names %r, which matches no tool; use `mcp_<server>__<tool>`", name)
        return found

    async def list_tools(self, session: Session | None = None) -> list[ToolEntry]:
        catalog = await self.catalog(session)
        return [*catalog.entries, *catalog.top_level]

    # --- calls -------------------------------------------------------------------------------

    async def prepare(
        self, entry: ToolEntry, arguments: dict[str, Any], session: Session
    ) -> tuple[dict[str, Any], Any]:
        """Validate, run the before-call guardrails, then judge the final input: (input, risk)."""
        from toolshell.policy.guardrails import GuardCall

        validate_input(entry, arguments)
        arguments = await self.policy.guardrails.before(GuardCall(entry, arguments, session.id))
        risk = await self.policy.check(entry, arguments, session_id=session.id)
        return arguments, risk

    async def call_entry(self, entry: ToolEntry, arguments: dict[str, Any], session: Session) -> types.CallToolResult:
        """Make the call; the after-call guardrails see the result before the caller does."""
        from toolshell.policy.guardrails import GuardCall

        if entry.server is None:
            conn, context = self._top, session.context
        else:
            conn = await self.manager.get(entry.server)
            config = next((s for s in self._servers() if s.name == entry.server), None)
            context = session.context if config is None else self.server_context(session, config)
        options = CallOptions(session=context, answerer=session.answerer)
        result = await conn.call_tool(entry.name, arguments, options)
        return await self.policy.guardrails.after(GuardCall(entry, arguments, session.id), result)

    async def call_tool(
        self, server: str | None, tool: str, arguments: dict[str, Any] | None = None, *, session: Session | None = None
    ) -> types.CallToolResult:
        """Call one tool directly, through the same validation, policy and guardrails as a script.

        Raises:
            ToolshellError: `unknown_command`, `invalid_input`, `denied`, `needs_approval`, `unavailable`...
        """
        session = session or self.session()
        catalog = await self.catalog(session)
        words = [server, tool] if server else [tool]
        look = catalog.lookup(words)
        if look.kind == "unloaded_server" and look.server is not None:
            await self.load_server(look.server.name)
            look = (await self.catalog(session)).lookup(words)
        if look.entry is None:
            raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no tool {' '.join(words)!r}")
        arguments, risk = await self.prepare(look.entry, arguments or {}, session)
        if risk.level == "blocked":
            raise ToolshellError(ErrorCode.DENIED, risk.message or "blocked by policy")
        if risk.level == "needs_approval":
            self.policy.approvals.request(look.entry, arguments, session.id, risk.why or "")
            raise ToolshellError(ErrorCode.NEEDS_APPROVAL, risk.message or "this call needs approval")
        return await self.call_entry(look.entry, arguments, session)

    # --- sessions ----------------------------------------------------------------------------

    def session(self, **kwargs: Any) -> Session:
        """A new agent session (its own sandboxed shell). See `Session` for the keyword arguments."""
        session = Session(self, **kwargs)
        self._sessions[session.id] = session
        return session

    def forget_session(self, session_id: str) -> None:
        """Drop what the host keeps for an ended session (its switched-off servers and shown tools)."""
        self._disabled.pop(session_id, None)
        self._unlocked.pop(session_id, None)

    async def plan(self, script: str, **kwargs: Any) -> dict[str, Any]:
        """What `tools plan` prints for a script: each visible call with input and risk. Runs nothing."""
        from toolshell.precheck import Precheck
        from toolshell.shell_call import ShellCall

        session = self.session(**kwargs)
        return await Precheck(ShellCall(session, await self.catalog(session), script)).plan(script)

    async def run(self, script: str, **kwargs: Any) -> Any:
        """Run one script in a new session and return its `RunResult`."""
        session = self.session(**kwargs)
        try:
            return await session.run(script)
        finally:
            session.close()

    async def run_saved_script(self, name: str, arguments: dict[str, Any], source: str = "trigger") -> Any:
        """Run a saved script with no model and nobody to ask (triggers): a `RunOutcome`."""
        import json
        import shlex

        from toolshell.scripts.triggers import RunOutcome

        script = f"tools scripts {shlex.quote(name)} {shlex.quote(json.dumps(arguments, ensure_ascii=False))}"
        session = self.session(source=source, answerer=None)
        try:
            result = await session.run(script)
        finally:
            session.close()
        return RunOutcome(result.exit_code, result.stdout, result.stderr, result.tools)


def _entry(server: str | None, tool: types.Tool, trusted: bool) -> ToolEntry:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    annotations.pop("title", None)
    return ToolEntry(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        annotations=annotations,
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
        trusted=trusted,
    )


def _with_inproc(config: Config, servers: dict[str, Any]) -> Config:
    """Declare in-process servers passed to `Host(servers=...)` that the config does not name."""
    declared = {s.name for s in config.mcp.servers}
    extra = [ServerConfig(name=n, type="builtin") for n in servers if n not in declared]
    if not extra:
        return config
    return config.model_copy(update={"mcp": config.mcp.model_copy(update={"servers": [*config.mcp.servers, *extra]})})


def _project_id(workdir: Path) -> str:
    """16 hex chars from the normalized git remote, or from the canonical path without one."""
    key = str(workdir.resolve())
    git_config = workdir / ".git" / "config"
    if git_config.is_file():
        m = re.search(r'\[remote "origin"\][^\[]*?url\s*=\s*(\S+)', git_config.read_text(errors="ignore"))
        if m:
            key = re.sub(r"^(https?://|git@|ssh://)", "", m.group(1)).replace(":", "/").removesuffix(".git")
    return hashlib.sha256(key.encode()).hexdigest()[:16]


__all__ = ["Host"]
