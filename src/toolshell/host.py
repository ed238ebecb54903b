"""`Host`: the composition root and the Python API. It owns the connections, policy, state and
timeline, and hands each session the few collaborators it uses (`session.SessionServices`).

async with Host.open() as host:                    # the embedded default
    result = await host.run("tools text-metrics text-length text=hello")
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shlex
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types

from toolshell import config as config_mod
from toolshell.builtin import as_factory, resolve_builtin
from toolshell.builtin.web_fetch import create as create_web_fetch
from toolshell.calls.approval import ApprovalGate
from toolshell.calls.ledger import Ledger
from toolshell.calls.view import CatalogView
from toolshell.config import Config, ServerConfig
from toolshell.connections.base import ConnState, ServerStatus
from toolshell.connections.factory import make_connection
from toolshell.connections.manager import ConnectionManager
from toolshell.connections.oauth import AuthSetup
from toolshell.connections.remembered import RememberedTools
from toolshell.errors import ToolshellError, single_error
from toolshell.policy.guardrails import Guardrail
from toolshell.policy.policy import Policy
from toolshell.policy.rating import Rater
from toolshell.redact import Redactor, guard_logs
from toolshell.registry.catalog import Catalog
from toolshell.registry.catalog_memo import CatalogMemo
from toolshell.registry.entry import ToolEntry
from toolshell.registry.filters import check_role, configured_servers
from toolshell.registry.naming import fold, parse_flat_name
from toolshell.registry.overlay import Overlays
from toolshell.result import RunResult
from toolshell.routing import ServerRouter
from toolshell.runtime_overlay import RuntimeOverlay
from toolshell.scripts.store import ScriptStore
from toolshell.scripts.triggers import RunOutcome
from toolshell.session import Session, SessionServices, Source
from toolshell.shell.pool import ShellPool
from toolshell.shell.precheck import Precheck
from toolshell.store.engines import open_store
from toolshell.store.keys import key_ring
from toolshell.store.protocol import StateStore
from toolshell.telemetry import metrics_for, telemetry_for
from toolshell.timeline.audit import audit_for
from toolshell.timeline.sinks import EventSink, MemorySink, SqliteSink

logger = logging.getLogger(__name__)
_TOP_LEVEL = ServerConfig(name="toolshell-top-level", type="builtin", timeout_seconds=60)
OnWait = Callable[[list[str], float], None]


class Host:
    """An MCP host. Use `Host.open(config)`; it starts the `load = "startup"` servers concurrently.

    Args:
        config: The configuration; None is the embedded default (built-in servers only).
        state_dir: Where the SQLite state lives (default: `[state] dir` or the user data dir).
        store: The state store (default: `[state] url` or `$TOOLSHELL_STATE_URL`, else
            `toolshell.db` in `state_dir`).
        rater: Rates tools that declare nothing about their risk (default: `[approval] rater`).
        guardrails: Extra guardrails run before and after every call.
        sink: Where timeline events go (default: the state store).
        on_server_progress: Called as each startup server changes state.
        servers: In-process servers by name (an `MCPServer`, a lowlevel `Server`, or a factory),
            added as `type = "builtin"` servers unless the config declares that name itself.
        on_wait: Called with the servers still starting when opening waits longer than a second.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        state_dir: str | Path | None = None,
        store: StateStore | None = None,
        rater: Rater | None = None,
        guardrails: Sequence[Guardrail] = (),
        sink: EventSink | None = None,
        on_server_progress: Any = None,
        servers: dict[str, Any] | None = None,
        on_wait: OnWait | None = None,
    ) -> None:
        self.config = with_inproc(config or Config(), servers or {})
        self.redact = Redactor(self.config.secrets)
        self.telemetry = telemetry_for(self.config.telemetry, self.redact)  # telemetry: None when off
        self.worker_id = uuid.uuid4().hex[:16]
        """This host among the workers sharing its store (`store.workers`)."""
        guard_logs(self.config.secrets)
        self._inproc = dict(servers or {})
        self.state_dir = config_mod.state_dir(self.config, str(state_dir) if state_dir else None)
        self.store = store or open_store(config_mod.state_location(self.config, str(state_dir) if state_dir else None))
        self.sink: EventSink = sink or SqliteSink(self.store)
        serve = self.config.serve
        self.metrics = metrics_for(  # metrics: None when off
            self.config.telemetry,
            self.store,
            worker=self.worker_id,
            idle_seconds=serve.shell_idle_seconds,
            heartbeat_seconds=serve.heartbeat_seconds,
            redact=self.redact,
        )
        if self.metrics is not None and isinstance(self.sink, SqliteSink):  # metrics: the store's latency
            self.sink.timed = self.metrics.store_write
        skip = frozenset(s.name for s in self.config.mcp.servers if not s.audit)
        self.audit = audit_for(
            self.config.audit, self.state_dir, self.redact, self.worker_id, skip, self.config.telemetry
        )
        self.policy = Policy(self.config, self.store, rater)
        for guard in guardrails:
            self.policy.guardrails.add(guard)
        self.project_id = project_id(Path.cwd())
        self.overlays = Overlays()
        configured = self._servers()
        builtins = {s.name: self._builtin_for(s) for s in configured if s.type == "builtin"}
        oauth = AuthSetup(self.state_dir / "oauth", store=self.store)
        self.manager = ConnectionManager(configured, builtins, auth=oauth)
        self.manager.telemetry = self.telemetry  # telemetry
        self._top = make_connection(_TOP_LEVEL, builtin=lambda: create_web_fetch(self, config=self.config.web_fetch))
        remembered = RememberedTools(self.store, self.redact)
        for server in configured:  # each fetched list outlives the process (help, search, plan)
            if (conn := self.manager.connection(server.name)) is not None:
                conn.on_tools_listed = functools.partial(remembered.remember, server)
        self.connections = ServerRouter(self.config, self.manager, self.overlays, self._top, remembered)
        self.catalogs = CatalogMemo(self.config, self.connections, self.overlays, self.connections.top_level_entries)
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self.runtime = RuntimeOverlay(
            self.config, self.manager, self.connections, self.overlays, self._sessions, self.statuses
        )
        """Each session's switches (`runtime mcp action=…`), as the `runtime` built-in asks for them."""
        self._on_server_progress = on_server_progress
        self._on_wait = on_wait
        self.shells = ShellPool(self.config.shell)  # the shells of `run`'s ended sessions, for the next ones
        self._services = SessionServices(
            config=self.config,
            policy=self.policy,
            sink=self.sink,
            scripts=ScriptStore(self.store),
            project_id=self.project_id,
            redact=self.redact,
            catalog=self.catalog,
            kept_catalog=self.catalogs.kept,
            load_server=self.load_server,
            target=self.connections.target,
            end=self._end_session,
            visible_tools=self.visible_tools,
            worker=self.worker_id,
            telemetry=self.telemetry,  # telemetry
            metrics=self.metrics,  # metrics
            audit=self.audit,
            shells=self.shells,
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        config: Config | str | Path | None = None,
        *,
        state_dir: str | Path | None = None,
        store: StateStore | None = None,
        rater: Rater | None = None,
        guardrails: Sequence[Guardrail] = (),
        sink: EventSink | None = None,
        on_server_progress: Any = None,
        servers: dict[str, Any] | None = None,
        on_wait: OnWait | None = None,
        start: Collection[str] | None = None,
    ) -> AsyncIterator[Host]:
        """Open a host from a `Config`, a config file path, or nothing (the embedded default).

        `start` names the startup servers to open now (`policy.reach`: those a script names);
        None opens every one. The others open when a call names them.

        An exception raised in the body of `async with Host.open() as host:` reaches the caller as
        itself, never wrapped in an `ExceptionGroup`.
        """
        if isinstance(config, str | Path):
            config = config_mod.load_file(config)
        host = cls(
            config,
            state_dir=state_dir,
            store=store,
            rater=rater,
            guardrails=guardrails,
            sink=sink,
            on_server_progress=on_server_progress,
            servers=servers,
            on_wait=on_wait,
        )
        try:
            async with AsyncExitStack() as stack:
                stack.push_async_callback(host.aclose)
                starting = await stack.enter_async_context(anyio.create_task_group())
                await host._start_servers(starting, start)
                try:
                    yield host
                finally:
                    starting.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise single_error(group) from None

    async def _start_servers(self, tg: anyio.abc.TaskGroup, only: Collection[str] | None = None) -> None:
        """Start the `startup` servers concurrently; wait for them at most `startup_wait_seconds`.

        A server still starting after that keeps starting in the background: it is listed as
        starting, and a call that names it waits for it (up to its own startup timeout).
        """
        done = anyio.Event()

        async def start_all() -> None:
            try:
                await self.manager.start_all(self._on_server_progress, only)
            finally:
                done.set()

        tg.start_soon(start_all)
        tg.start_soon(self.catalogs.prime)
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
            if self.metrics is not None:  # metrics: export what is left (its gauges read the store)
                self.metrics.shutdown()
            self.store.close()
            if self.audit is not None:
                self.audit.close()
            if self.telemetry is not None:  # telemetry: export what is left
                self.telemetry.shutdown()

    # --- servers -----------------------------------------------------------------------------

    def _servers(self) -> list[ServerConfig]:
        """Configured servers, plus the shipped built-ins the file does not declare itself."""
        return [s for s in configured_servers(self.config) if s.enabled]

    def _builtin_for(self, server: ServerConfig) -> Any:
        """A factory of the in-process server; resolving a `module` waits until the server opens."""
        if server.name in self._inproc:
            factory = as_factory(self._inproc[server.name], "Host(servers=...)", server.name)
            return lambda: factory(self)
        return lambda: resolve_builtin(server.name, server.module, folder=server.folder)(self)

    def statuses(self) -> list[ServerStatus]:
        """Every configured server's state, with secrets redacted from its errors and stderr."""
        statuses = self.manager.statuses()
        if not self.redact:
            return statuses
        return [
            dataclasses.replace(
                s,
                last_error=None if s.last_error is None else self.redact(s.last_error),
                stderr_tail=[self.redact(line) for line in s.stderr_tail],
            )
            for s in statuses
        ]

    async def load_server(self, name: str) -> None:
        """Open a server (an `on_demand` one on first use)."""
        await self.manager.get(name)

    # --- catalog -----------------------------------------------------------------------------

    async def catalog(self, session: Session | None = None) -> Catalog:
        """The tools this session can call now (its last catalog while nothing changed: `catalog_memo`)."""
        return await self.catalogs.catalog(session or self.session())

    async def visible_tools(self, session: Session | None = None) -> list[ToolEntry]:
        """The `keep_visible` tools (flat or plain names, hyphens and underscores alike), lazy ones loaded.

        They stay callable from the shell too. Names that match no tool are logged, not fatal.
        """
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

    async def call_tool(
        self, server: str | None, tool: str, arguments: dict[str, Any] | None = None, *, session: Session | None = None
    ) -> types.CallToolResult:
        """Call one tool directly, by the shell's rules (see `Session.call_tool`): in `session`, or
        in a new session of its own.

        Raises:
            ToolshellError: `unknown_command`, `invalid_input`, `denied`, `needs_approval`, `unavailable`...
        """
        if session is not None:
            result: types.CallToolResult = await session.call_tool(server, tool, arguments or {})
            return result
        own = self.session()
        try:
            result = await own.call_tool(server, tool, arguments or {})
            return result
        finally:
            own.close()

    # --- sessions ----------------------------------------------------------------------------

    def session(
        self,
        *,
        session_id: str | None = None,
        role: str | None = None,
        answerer: Any = None,
        source: Source = "agent",
        workdir: str | None = None,
        caller: str | None = None,
    ) -> Session:
        """A new agent session (its own sandboxed shell). See `Session` for the arguments.

        Raises:
            ToolshellError: `invalid_input` for a role the config does not know (with the nearest names).
        """
        check_role(self.config, role)
        session = Session(
            self._services,
            session_id=session_id,
            role=role,
            answerer=answerer,
            source=source,
            workdir=workdir,
            caller=caller,
        )
        self._sessions[session.id] = session
        return session

    def _end_session(self, session_id: str) -> None:
        """Drop what the host keeps for an ended session (open questions, switched-off servers, shown tools)."""
        self.manager.cancel_session(session_id)
        self.overlays.forget(session_id)

    def forget_session(self, session_id: str) -> None:
        self.overlays.forget(session_id)

    async def plan(self, script: str, *, role: str | None = None) -> dict[str, Any]:
        """What `tools plan` prints for a script: each visible call with input and risk. Runs nothing."""
        session = self.session(role=role)
        view = CatalogView(await self.catalog(session), self.load_server, lambda: self.catalog(session))
        ledger = Ledger(uuid.uuid4().hex[:16], session.id, self.config.tools_in_shell.call_limit, MemorySink())
        gate = ApprovalGate(self.policy.approvals, session.id, approver=None)
        return await Precheck(view, self.policy, gate, ledger).plan(script)

    async def run(
        self, script: str, *, role: str | None = None, answerer: Any = None, source: Source = "agent"
    ) -> RunResult:
        """Run one script in a new session and return its `RunResult`."""
        session = self.session(role=role, answerer=answerer, source=source)
        try:
            result = await session.run(script)
        finally:
            session.close()
        self.shells.give_back(session.shell)  # nobody else holds this session; its shell call ended
        return result

    async def run_saved_script(self, name: str, arguments: dict[str, Any], source: str = "trigger") -> RunOutcome:
        """Run a saved script with no model and nobody to ask (triggers): a `RunOutcome`."""
        script = f"tools scripts {shlex.quote(name)} {shlex.quote(json.dumps(arguments, ensure_ascii=False))}"
        result = await self.run(script, source="script" if source == "script" else "trigger")
        return RunOutcome(result.exit_code, result.stdout, result.stderr, result.tools)


def state_ring(host: Host) -> list[bytes]:
    """The state key ring of `host` (`[serve] state_keys_env`, else the state dir's own key; refused
    on a shared store without one)."""
    serve = host.config.serve
    return key_ring(
        os.environ.get(serve.state_keys_env), host.state_dir, shared=host.store.shared, env_name=serve.state_keys_env
    )


__all__ = ["Host", "state_ring"]


def with_inproc(config: Config, servers: dict[str, Any]) -> Config:
    """Declare in-process servers passed to `Host(servers=...)` that the config does not name."""
    declared = {s.name for s in config.mcp.servers}
    extra = [ServerConfig(name=n, type="builtin") for n in servers if n not in declared]
    if not extra:
        return config
    return config.model_copy(update={"mcp": config.mcp.model_copy(update={"servers": [*config.mcp.servers, *extra]})})


def project_id(workdir: Path) -> str:
    """16 hex chars from the normalized git remote, or from the canonical path without one."""
    key = str(workdir.resolve())
    git_config = workdir / ".git" / "config"
    if git_config.is_file():
        m = re.search(r'\[remote "origin"\][^\[]*?url\s*=\s*(\S+)', git_config.read_text(errors="ignore"))
        if m:
            key = re.sub(r"^(https?://|git@|ssh://)", "", m.group(1)).replace(":", "/").removesuffix(".git")
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
