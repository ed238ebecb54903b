"""`ClientConnection`: one configured server (built-in, stdio or Streamable HTTP) behind `Connection`.

Lifecycle: NOT_LOADED → CONNECTING → READY; an HTTP 401/403 at any point → NEEDS_AUTH (no backoff:
the next call tries again, and succeeds once the person has logged in); a failed start, a lost
transport or a server that cannot list its tools → FAILED, retried on a later call (or `start()`)
once the backoff allows; `close()` → CLOSED. Concurrent callers share one start attempt. Every error leaves here as a
`ToolshellError` (translated in `translate.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.client import Client, IncomingMessage
from pydantic import ValidationError

from toolshell.config import ServerConfig
from toolshell.connections.backoff import Backoff, Clock
from toolshell.connections.base import CallOptions, ConnState, ServerStatus, SessionContext
from toolshell.connections.context_sent import context_for
from toolshell.connections.elicitation import ElicitationRouter, InFlightCall
from toolshell.connections.http import describe_challenge
from toolshell.connections.list_cut import offered
from toolshell.connections.runner import Runner
from toolshell.connections.session_meta import SessionClient, request_meta
from toolshell.connections.targets import Target
from toolshell.connections.timer import CAP_FACTOR, CallTimer
from toolshell.connections.tool_cache import MAX_PAGES, ToolCache, capped_note, is_private
from toolshell.connections.translate import Situation, first_leaf, is_connection_lost, is_session_lost, translate
from toolshell.connections.upstream_tasks import UpstreamTasks
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.validate import late_notes
from toolshell.version import __version__

logger = logging.getLogger(__name__)

_CLIENT_INFO = types.Implementation(name="toolshell", version=__version__)


class ClientConnection:
    """A `Connection` to one server through `mcp.client.Client`."""

    def __init__(
        self,
        server: ServerConfig,
        target: Target,
        *,
        clock: Clock = time.monotonic,
        mode: str = "auto",
        cap_factor: float = CAP_FACTOR,
    ) -> None:
        """Args:
        server: The server's config entry.
        target: How to open it (see `targets.py`; `factory.make_connection` picks one).
        clock: Measures restart backoff; tests pass a fake one.
        mode: The SDK's connect mode: "auto" (discover, else initialize), "legacy", or a version.
        cap_factor: The absolute cap of a call, in idle timeouts.
        """
        self.name = server.name
        self.server = server
        self.router = ElicitationRouter(server.name)
        self.on_tools_changed: Callable[[str], object] | None = None
        """Called with the server name when its tool list changed (the registry drops its catalog)."""
        self.on_tools_listed: Callable[[list[types.Tool], int | None], object] | None = None
        """Called with a shared (not private) list just fetched and its `ttlMs` (the host remembers it)."""
        self._target = target
        self._mode = mode
        self._cap_factor = cap_factor
        self._cache = ToolCache()
        self._tasks = UpstreamTasks(server.name)
        self._backoff = Backoff(clock)
        self._state = ConnState.NOT_LOADED
        self._runner: Runner | None = None
        self._spawned: list[Runner] = []  # every runner until it is done, so close() waits for all
        self._last_error: str | None = None
        self._failure: ToolshellError | None = None  # why it is FAILED; its `retryable` is kept while waiting
        self._noise: str | None = None
        self._protocol_version: str | None = None
        self._starts = 0
        self._connect_session = SessionContext()
        self._auth_reason: str | None = None

    # --- Connection -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (idempotent; concurrent callers share one attempt). Raises ToolshellError.

        A server that refused us after the handshake is asked for its tools again: that raises
        `connection_required` while the refusal lasts, and makes it READY once a login took.
        """
        await self._ensure(None)
        if self._state is ConnState.NEEDS_AUTH:
            await self.list_tools(self._connect_session)

    async def list_tools(self, session: SessionContext) -> list[types.Tool]:
        """The server's tools: cached per server (or per session for a private list)."""
        for attempt in range(2):
            client = await self._ensure(session)
            cached = self._cache.get(session.session_id)
            if cached is not None:
                return list(cached)
            runner, generation = self._runner, self._cache.generation
            try:
                with anyio.fail_after(self.server.timeout_seconds):
                    tools, private, capped, ttl_ms = await self._fetch_tools(client, session)
            except Exception as e:  # noqa: BLE001 - translated below, groups included
                if attempt == 0 and await self._renewed_session(e, runner):
                    continue
                raise self._listing_failed(e, runner) from None
            self._succeeded(runner)
            listed = self._cache.put(
                tools, private=private, session_id=session.session_id, generation=generation, capped=capped
            )
            if not private and self.on_tools_listed is not None:
                try:
                    self.on_tools_listed(listed, ttl_ms)
                except Exception:  # remembering is for help and search: a failing store must not fail the call
                    logger.warning("the tool list of %r could not be remembered", self.name, exc_info=True)
            return listed
        raise AssertionError("unreachable")

    def list_stamp(self, session: SessionContext) -> int | None:
        """The stamp of the list `list_tools` would return from cache now; None when it would fetch."""
        return self._cache.stamp(session.session_id)

    async def call_tool(self, name: str, arguments: dict[str, Any], options: CallOptions) -> types.CallToolResult:
        """Call one tool; idle timeout refreshed by progress (and by polls of the server's task,
        `upstream_tasks`), absolute cap, both paused by questions."""
        for attempt in range(2):
            client = await self._ensure(options.session)
            runner = self._runner
            try:
                result = await self._call_once(client, name, arguments, options)
            except ToolshellError:
                raise
            except Exception as e:  # noqa: BLE001 - translated below, groups included
                if attempt == 0 and await self._renewed_session(e, runner):
                    continue
                raise self._failed(e, runner, f"calling {name!r}") from None
            self._succeeded(runner)
            return result
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the client and end the server (stdio: stdin, wait, then its whole process group)."""
        self._state = ConnState.CLOSED
        self._runner = None
        async with anyio.create_task_group() as tg:
            for runner in self._spawned:
                tg.start_soon(runner.stop)
        self._spawned.clear()

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.name,
            type=self.server.type,
            state=self._state,
            load=self.server.load,
            protocol_version=self._protocol_version,
            tool_count=self._cache.last_count,
            last_error=self._last_error,
            stderr_tail=self._target.stderr_tail(),
            notes=[*self._cache.notes, *late_notes(self.name), *self._target.notes()],
            restarts=max(0, self._starts - 1),
            auth_reason=self._auth_reason if self._state is ConnState.NEEDS_AUTH else None,
        )

    def cancel_session(self, session_id: str) -> int:
        """Resolve that session's open questions as `cancel` and forget its private tool list."""
        self._cache.drop_session(session_id)
        return self.router.cancel_session(session_id)

    # --- lifecycle ------------------------------------------------------------------------------

    async def _ensure(self, session: SessionContext | None) -> Client:
        """The open client, starting (or restarting, after the backoff) the server if needed."""
        while True:
            if self._state is ConnState.CLOSED:
                raise ToolshellError(ErrorCode.UNAVAILABLE, f"server {self.name!r} is closed")
            runner = self._runner
            if runner is None:
                self._check_backoff()
                runner = self._begin(session)
            if not runner.ready.is_set():  # the warm path must not yield to the loop on every call
                await runner.ready.wait()
            self._settle(runner)
            if runner is self._runner and runner.client is not None:
                return runner.client
            if runner is self._runner and runner.done.is_set():
                # The client task ended on its own after it had connected: the transport is gone.
                self._lost(runner)
                raise ToolshellError(ErrorCode.UNAVAILABLE, f"{self._last_error}; try again", retryable=True)
            if runner.failure is not None:
                raise runner.failure

    def _begin(self, session: SessionContext | None) -> Runner:
        if session is not None:
            self._connect_session = session
        attempt = self._target.attempt()
        timeout = self.server.startup_timeout_seconds
        runner = Runner(attempt, self._make_client, timeout, self._tools_changed, on_gone=self._lost)
        self._runner = runner
        self._spawned = [r for r in self._spawned if not r.done.is_set()] + [runner]
        self._state = ConnState.CONNECTING
        self._starts += 1
        self._noise = None
        self._cache.invalidate()
        runner.start()
        return runner

    def _make_client(self, server_arg: Any) -> Client:
        client = SessionClient(
            server_arg,
            mode=self._mode,
            elicitation_callback=self.router.callback,
            extensions=[self._tasks],
            message_handler=self._on_message,
            client_info=_CLIENT_INFO,
            cache=None,  # we keep the tool list ourselves, per the seed's rules
        )
        client.connect_session = context_for(self.server, self._connect_session)
        return client

    def _settle(self, runner: Runner) -> None:
        """Record how a start attempt ended (once, by whichever waiter sees it first)."""
        if runner is not self._runner or self._state is not ConnState.CONNECTING:
            return
        if runner.client is not None:
            self._state = ConnState.READY
            self._protocol_version = runner.client.protocol_version
            self._last_error = None
            self._failure = None
            return
        if runner.error is None:  # stopped before it connected (close, reconnect)
            return
        runner.failure = self._could_not_start(runner.error, runner.stream_ended.is_set())
        self._runner = None
        self._failure = runner.failure
        self._last_error = runner.failure.message
        if runner.failure.code is ErrorCode.CONNECTION_REQUIRED:
            self._refused()  # waiting fixes nothing, a login does: no backoff
            return
        self._state = ConnState.FAILED
        self._backoff.failed()

    def _check_backoff(self) -> None:
        wait = self._backoff.wait_left()
        if wait <= 0:
            return
        failure = self._failure
        if failure is not None and not failure.retryable:
            # Waiting will not fix a missing command or a bad config: repeat what to fix instead.
            raise ToolshellError(failure.code, failure.message)
        raise ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"{self._last_error}; a call after {math.ceil(wait)}s will start it again",
            retryable=True,
        )

    def _could_not_start(self, exc: BaseException, stream_ended: bool) -> ToolshellError:
        where = dataclasses.replace(self._situation("starting"), stream_ended=stream_ended)
        err = translate(exc, dataclasses.replace(where, stderr_line=None))  # said once, below
        if err.code is not ErrorCode.UNAVAILABLE or not err.retryable:
            return err
        leaf = first_leaf(exc)
        if isinstance(leaf, TimeoutError):
            reason = f"no answer to the MCP handshake within {self.server.startup_timeout_seconds:g}s"
        else:
            reason = err.message
        if self._noise:
            reason += f"; {self._noise}"
        if where.stderr_line:
            reason += f"; its stderr said: {where.stderr_line!r}"
        return ToolshellError(ErrorCode.UNAVAILABLE, f"server {self.name!r} could not start: {reason}", retryable=True)

    def _lost(self, runner: Runner | None) -> None:
        """The transport died under us: FAILED now, restarted on a later call after the backoff."""
        if runner is None or runner is not self._runner:
            return
        said = self._target.last_words()
        message = f"server {self.name!r} stopped" + (f"; its last words on stderr: {said!r}" if said else "")
        self._give_up(runner, ToolshellError(ErrorCode.UNAVAILABLE, message, retryable=True))

    def _give_up(self, runner: Runner | None, failure: ToolshellError) -> None:
        """Close a connected server that is of no use: FAILED, restarted on a later call after the backoff."""
        if runner is None or runner is not self._runner:
            return
        self._runner = None
        self._state = ConnState.FAILED
        self._failure = failure
        self._last_error = failure.message
        self._backoff.failed()
        self._cache.invalidate()
        runner.stop_soon()

    def _listing_failed(self, exc: BaseException, runner: Runner | None) -> ToolshellError:
        """A server that cannot list its tools (no answer, broken transport) is given up, so catalog
        builds skip it instead of waiting the full timeout again; a call that names it restarts it."""
        err = self._failed(exc, runner, "listing tools")
        if err.code is not ErrorCode.UNAVAILABLE or not err.retryable:
            return err  # the server answered, with an error: it is alive
        if isinstance(first_leaf(exc), TimeoutError):
            timeout = self.server.timeout_seconds
            err = ToolshellError(
                ErrorCode.UNAVAILABLE,
                f"server {self.name!r} did not answer tools/list within {timeout:g}s",
                retryable=True,
            )
        self._give_up(runner, err)
        return err

    async def _renewed_session(self, exc: BaseException, runner: Runner | None) -> bool:
        """After an HTTP session 404, open a new session so the caller can retry once."""
        if runner is None or not is_session_lost(exc, self._target.http_status()):
            return False
        if runner is self._runner:
            self._runner = None
            self._state = ConnState.NOT_LOADED
            self._cache.invalidate()
        await runner.stop()
        return True

    def _failed(self, exc: BaseException, runner: Runner | None, action: str) -> ToolshellError:
        ended = runner is not None and (runner.stream_ended.is_set() or runner.done.is_set())
        err = translate(exc, dataclasses.replace(self._situation(action), stream_ended=ended))
        if err.code is ErrorCode.CONNECTION_REQUIRED and runner is self._runner:
            self._last_error = err.message
            self._refused()  # the session stays open: the next request may carry a fresh token
        elif is_connection_lost(exc, stream_ended=ended):
            self._lost(runner)
        return err

    def _refused(self) -> None:
        self._state = ConnState.NEEDS_AUTH
        self._auth_reason = describe_challenge(self._target.auth_challenge())

    def _succeeded(self, runner: Runner | None) -> None:
        self._backoff.reset()
        self._target.clear_refusal()
        if self._state is ConnState.NEEDS_AUTH and runner is self._runner and runner is not None:
            self._state = ConnState.READY  # logged in meanwhile
            self._last_error = None

    def _situation(self, action: str) -> Situation:
        t = self._target
        challenge = describe_challenge(t.auth_challenge())
        return Situation(self.name, action, t.http_status(), t.last_words(), challenge, t.uses_oauth())

    # --- calls ----------------------------------------------------------------------------------

    async def _call_once(
        self, client: Client, name: str, arguments: dict[str, Any], options: CallOptions
    ) -> types.CallToolResult:
        idle = options.timeout_seconds or self.server.timeout_seconds
        timer = CallTimer(idle, self._cap_factor)
        call = InFlightCall(options.session, options.answerer, timer, name)
        hook = options.on_progress

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            timer.touch()
            if hook is not None:
                await hook(progress, total, message)

        with self.router.track(call):
            with timer.scope:
                meta = request_meta(context_for(self.server, options.session))
                send = partial(client.call_tool, name, arguments, progress_callback=on_progress, meta=meta)
                result = await self._tasks.call(client, call, send)
            if timer.scope.cancelled_caught:
                raise self._timed_out(name, timer)
        return result

    def _timed_out(self, tool: str, timer: CallTimer) -> ToolshellError:
        prefix = f"server {self.name!r} tool {tool!r}"
        if timer.expired == "cap":
            msg = f"{prefix} ran past its absolute cap of {timer.cap:g}s ({self._cap_factor:g} × the idle timeout)"
        else:
            msg = f"{prefix} timed out after {timer.idle:g}s without progress"
        return ToolshellError(ErrorCode.UNAVAILABLE, msg, retryable=True)

    async def _fetch_tools(
        self, client: Client, session: SessionContext
    ) -> tuple[list[types.Tool], bool, str | None, int | None]:
        """The listing, page by page, up to `max_tools`: past it nothing more is kept or fetched.
        Returns the tools, whether the list is private, what was left out (a note) if anything, and
        the first page's `ttlMs`."""
        cap = self.server.max_tools
        tools: list[types.Tool] = []
        private = False
        dropped = 0
        cursor: str | None = None
        ttl_ms: int | None = None
        meta = request_meta(context_for(self.server, session))
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, meta=meta)
            ttl_ms = page.ttl_ms if ttl_ms is None and "ttl_ms" in page.model_fields_set else ttl_ms
            room = cap - len(tools)
            tools.extend(page.tools[:room])
            dropped += max(0, (offered(page.meta) or len(page.tools)) - room)  # `list_cut` may have cut it
            private = private or is_private(page, client.protocol_version)
            cursor = page.next_cursor
            if not cursor or len(tools) >= cap:
                break
        return tools, private, capped_note(cap, dropped, unread=bool(cursor) and len(tools) >= cap), ttl_ms

    # --- notifications --------------------------------------------------------------------------

    def _tools_changed(self) -> None:
        self._cache.invalidate()
        if self.on_tools_changed is not None:
            self.on_tools_changed(self.name)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()
        elif isinstance(message, ValidationError):
            # A line on stdout that is not JSON-RPC: a server printing logs to the wrong stream.
            errors = message.errors()
            shown = errors[0].get("input") if errors else None
            self._noise = f"it printed non-JSON on stdout: {str(shown)[:120]!r}"
            logger.debug("server %r: %s", self.name, self._noise)
        elif isinstance(message, Exception):
            logger.debug("server %r transport error: %r", self.name, message)
