"""`toolshell serve`: an MCP server that exposes `bash` (plus any `keep_visible` tools).

The agent host configures this one server instead of twenty. Each `bash` call is one shell call in
a session of its own per upstream connection; the model reads the result as plain text
(`bash_tool.bash_text`), code reads the JSON object of `RunResult` as `structuredContent`. When
the upstream client declared elicitation, a call that needs approval and a server's own question
are put to it (`frontends.serve.upstream`): in `input_required` rounds for 2026-07-28 clients (the
script waits, parked), as `elicitation/create` on the call's stream for older ones. A client
without elicitation gets the stop report; servers' questions are declined. Over HTTP every request
is authenticated (`serve_auth`), and the caller's identity goes on each session, so on every shell
call and approval request.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from toolshell import secrets_scan
from toolshell.calls.approval import name_process_options
from toolshell.calls.replay import CallFeed
from toolshell.config import Config
from toolshell.connections.sdk_spans import lean_spans
from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.frontends.console import say_waiting
from toolshell.frontends.heartbeat import registered
from toolshell.frontends.serve.app import http_app
from toolshell.frontends.serve.auth import NO_AUTH, Gate, caller_of, serve_token, token_gate
from toolshell.frontends.serve.bash_tool import bash_result as _bash_result
from toolshell.frontends.serve.drain import CLOSE_SECONDS, DrainingServer
from toolshell.frontends.serve.event_store import EventLog, open_event_log
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.frontends.serve.processes import WorkerSlot
from toolshell.frontends.serve.relay import prepare, relay_for, stop_relay
from toolshell.frontends.serve.resume import resume_info, shell_gone
from toolshell.frontends.serve.tasks import RunScript, install_tasks, stop_tasks
from toolshell.frontends.serve.tasks.progress import reporting
from toolshell.frontends.serve.tasks.yielding import RunBash, stop_yields
from toolshell.frontends.serve.tool_list import ToolList, reads_structure
from toolshell.frontends.serve.upstream import (
    Asker,
    ParkedRun,
    Parking,
    StreamAsker,
    UpstreamAnswerer,
    can_ask,
    speaks_rounds,
    upstream_approver,
)
from toolshell.host import Host, state_ring
from toolshell.loopback import is_loopback_host
from toolshell.registry.entry import ToolEntry
from toolshell.shells import Shells
from toolshell.store.keys import for_purpose
from toolshell.telemetry.context import upstream
from toolshell.timeline.address import calling_from
from toolshell.version import __version__

logger = logging.getLogger(__name__)
_BASH_TAKES = 'bash takes {"script": "<bash script>"} and, to keep a shell, "shell": "<the shell of a result>"'


@asynccontextmanager
async def _parking(_: Server[Any]) -> AsyncIterator[Parking]:
    """The lifespan: a task group where parked `bash` calls of 2026-07-28 clients run (and the
    relay that carries their retries from other workers, `frontends.serve.relay`)."""
    async with anyio.create_task_group() as tg:
        parking = Parking(tg)
        try:
            yield parking
        finally:
            await stop_relay(parking)
            stop_tasks(parking)
            await stop_yields(parking)
            tg.cancel_scope.cancel()


def build_server(
    host: Host, keep_visible: list[ToolEntry], shells: Shells | None = None, notifier: ListNotifier | None = None
) -> Server[Any]:
    """The lowlevel server: `bash` plus proxies for the `keep_visible` tools.

    Each `bash` call runs in a shell named by a handle (`toolshell.shells`): the one the call passes
    as `shell`; else the one its client session keeps (the stdio client of this process, an HTTP
    `Mcp-Session-Id`: any worker on the store finds it); else, for a stateless 2026-07-28 request,
    a new one. The result names it, so the client can pass it back.
    """
    shells = shells or Shells.for_host(host)
    if host.metrics is not None:  # metrics: this worker's live shells, as `live_shell_bytes` bounds them
        host.metrics.watch_live_shells(lambda: shells.held)
    stdio_key = f"stdio:{uuid.uuid4().hex}"  # the one client of this process; never another process's
    visible = {e.flat_name: e for e in keep_visible}
    approval = host.config.approval
    # Under serve a client that declared elicitation is asked unless `[approval] inline = false`.
    asks_upstream = approval.inline or "inline" not in approval.model_fields_set

    async def session_shell(ctx: ServerRequestContext[Any], asked: str | None) -> str | None:
        """The shell a call runs in: the one it names, else its client session's (None: a stateless
        request, which gets a new one). The store is asked from a worker thread: a store that hangs
        holds that thread, not the event loop."""
        if asked is not None:
            return asked
        key = _client_key(ctx, stdio_key)
        return None if key is None else await anyio.to_thread.run_sync(shells.for_session, key, _caller(ctx))

    async def handle_of(ctx: ServerRequestContext[Any], asked: str | None) -> str:
        """`session_shell`, or a new shell's handle."""
        handle = await session_shell(ctx, asked)
        return handle if handle is not None else await anyio.to_thread.run_sync(shells.new, _caller(ctx))

    async def run_bash(
        ctx: ServerRequestContext[Any],
        script: str,
        shell: str | None,
        asker: Asker | None,
        on_output: Any = None,
        feed: CallFeed | None = None,
    ) -> types.CallToolResult:
        approver = upstream_approver(asker, approval.wait_seconds) if asker and asks_upstream else None
        answerer = UpstreamAnswerer(asker, ctx, approval.wait_seconds)
        handle = await session_shell(ctx, shell)
        started = time.perf_counter()
        async with reporting(ctx, on_output) as progress:  # notifications/progress, when the call asked for them
            with upstream(ctx.meta), calling_from(_address(ctx)):  # the client's trace context and address
                result = await shells.run(
                    _caller(ctx), handle, script, answerer=answerer, approver=approver, feed=feed, **progress
                )
        if host.metrics is not None:  # metrics: mcp.server.operation.duration
            host.metrics.bash_served(time.perf_counter() - started, result.success)
        # No shell kept for the client: the text says it. A client that shows its model the structure gets none.
        return _bash_result(result, handle=_client_key(ctx, stdio_key) is None, structured=not reads_structure(ctx))

    async def park_bash(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, script: str, shell: str | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A 2026-07-28 client that can answer: the script runs parked, questions become rounds.

        A retry for a run parked in another worker goes through the store (`frontends.serve.relay`)."""
        parking: Parking = ctx.lifespan_context
        relay = relay_for(parking, host.store, approval.wait_seconds)
        caller = _caller(ctx)
        if params.request_state is not None:
            run = parking.take(params.request_state)
            if run is None:
                return await relay.retry(params.request_state, caller, params.input_responses)
            run.answer(params.input_responses)
        else:
            run = ParkedRun()
            parking.park(run)

            async def execute() -> None:
                try:
                    run.finish(await run_bash(ctx, script, shell, run))
                except Exception as exc:  # the boundary of a background run: its caller gets the error
                    run.finish(error_result(ToolshellError(ErrorCode.UNAVAILABLE, f"bash failed: {exc}")))

            parking.tg.start_soon(execute)
        outcome = await run.next_round()
        if isinstance(outcome, types.CallToolResult):
            parking.done(run)
            await relay.delivered(run)
        else:
            await relay.publish(run, caller, outcome)
        return outcome

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        args = dict(params.arguments or {})
        if params.name == "bash":
            script, shell = args.get("script"), args.get("shell")
            if not isinstance(script, str) or not isinstance(shell, str | None):
                return error_result(ToolshellError(ErrorCode.INVALID_INPUT, _BASH_TAKES))
            asks = can_ask(ctx, "form") or can_ask(ctx, "url")  # the client can answer a question
            if tasks.offered(ctx):  # may become a task (`frontends.serve.tasks`, docs/tasks.md)
                handle = await handle_of(ctx, shell)  # a resumed run needs its shell
                resume = await anyio.to_thread.run_sync(resume_info, shells, _caller(ctx), handle, script, asks)
                return await tasks.call(
                    ctx, _caller(ctx), lambda a, f: run_bash(ctx, script, handle, a, feed=f), asks, resume
                )
            if asks and speaks_rounds(ctx):
                return await park_bash(ctx, params, script, shell)
            asker = StreamAsker(ctx) if asks else None
            handle = await handle_of(ctx, shell)  # yield-and-wait names it
            return await tasks.run_or_yield(
                ctx,
                _caller(ctx),
                handle,
                lambda o, a, f: run_bash(ctx, script, handle, a, o, f),
                asker,
                lambda version: resume_info(shells, _caller(ctx), handle, script, False, version),  # once it yields
            )
        entry = visible.get(params.name)
        if entry is None:
            unknown = f"no tool {params.name!r}; call `bash` and use `tools --help` inside it"
            return error_result(ToolshellError(ErrorCode.UNKNOWN_COMMAND, unknown))
        session = host.session(source="agent", caller=_caller(ctx))  # a direct call needs no shell
        try:
            with upstream(ctx.meta), calling_from(_address(ctx)):  # the client's trace context and address
                direct: types.CallToolResult = await session.call_tool(entry.server, entry.name, args)
            return direct
        except ToolshellError as e:
            return error_result(e)
        finally:
            session.close()

    # A `CreateTaskResult` is a plain dict: the runner sends a handler's dict as it is.
    on_call: Any = call_tool
    listing = ToolList(host, visible, notifier)  # `bash`'s schema static, the list kept per catalog
    server: Server[Any] = _ToolshellServer(
        "toolshell",
        version=__version__,
        on_list_tools=listing.answer,
        on_call_tool=on_call,
        lifespan=_parking,
        get_tool_input_schema=listing.input_schema,
    )
    # A parked run's requestState is bound to the caller that started it: another caller's retry fails.
    # It is sealed with the state key ring, so any worker holding the ring can open it.
    security = RequestStateSecurity(keys=for_purpose(state_ring(host), "request-state"), bind_principal=_caller)
    server.middleware.append(RequestStateBoundary(security, default_audience="toolshell"))
    lean_spans(server)  # the SDK's span of each request: free while nothing records spans
    # The records and resume data are sealed with the ring (`store.sealed` derives a key per purpose).
    ring = state_ring(host)
    park_after = host.config.approval.park_after_seconds
    prepare(host.store)  # the relay's tables, for parked runs' retries on other workers
    tasks = install_tasks(
        server, host.store, host.config.serve, host.worker_id, _caller, ring, notifier, host.redact, park_after
    )

    async def resumed(
        ctx: ServerRequestContext[Any],
        resume: dict[str, Any],
        asker: Asker | None,
        feed: CallFeed | None,
        on_output: Any,
    ) -> types.CallToolResult:
        """A call taken over from a dead worker (or parked): its script again, from the shell's state
        before the call, its nested calls answered from their records."""
        handle = str(resume["handle"])
        gone = await anyio.to_thread.run_sync(shell_gone, shells, _caller(ctx), resume)
        if gone is not None:
            return gone
        shells.handles.on_drop(handle)  # a live copy here may hold the stopped run's half: start from the store
        return await run_bash(ctx, str(resume["script"]), handle, asker, on_output, feed)

    def resumer(ctx: ServerRequestContext[Any], resume: dict[str, Any]) -> RunScript:
        return lambda asker, feed: resumed(ctx, resume, asker, feed, None)

    def yield_resumer(ctx: ServerRequestContext[Any], resume: dict[str, Any]) -> RunBash:
        return lambda on_output, asker, feed: resumed(ctx, resume, asker, feed, on_output)

    tasks.resumer, tasks.yield_resumer = resumer, yield_resumer
    return server


class _ToolshellServer(Server[Any]):
    """The lowlevel server, saying `tools.listChanged` to handshake-era clients: the `bash`
    description changes as servers settle (`list_notifier`)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=True)
        # The 2025-11-25 capabilities have no `extensions`: there the extensions go under `experimental`.
        experimental = {**self.extensions, **(experimental_capabilities or {})} or None
        return super().create_initialization_options(options, experimental, extensions)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    return is_loopback_host(host)


def _client_key(ctx: ServerRequestContext[Any], stdio_key: str) -> str | None:
    """Which client session's shell: the stdio client's, an HTTP session's (of its caller: the SDK
    lets only the caller that opened a session use it), or None for a stateless HTTP request
    (2026-07-28 requests carry no session id: such a client passes its shell's handle)."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return stdio_key
    session_id = headers.get("mcp-session-id")
    return f"http:{_caller(ctx)}:{session_id}" if session_id else None


def _address(ctx: ServerRequestContext[Any]) -> str | None:
    """The request's peer, or the client a trusted proxy named (`forwarded` rewrote `client`); None over stdio."""
    scope = getattr(ctx.request, "scope", None)
    client = scope.get("client") if isinstance(scope, dict) else None
    return str(client[0]) if client else None


def _caller(ctx: ServerRequestContext[Any]) -> str | None:
    """The identity `serve --http` authenticated (`serve_auth`); None over stdio and with `--no-auth`."""
    scope = getattr(ctx.request, "scope", None)
    return caller_of(scope) if isinstance(scope, dict) else None


async def serve(
    config: Config,
    state_dir: str | None,
    *,
    http: bool,
    host: str,
    port: int,
    config_path: str | None = None,
    no_auth: bool = False,
    worker: WorkerSlot | None = None,
) -> None:
    """Serve over stdio, or Streamable HTTP with every request authenticated (`serve_auth`):
    `[serve.oauth]` when configured, else the serve token; `no_auth` only on loopback. `worker`:
    this process is one of `--processes N`, on the socket its parent bound (`frontends.serve.processes`)."""
    if http and no_auth and not is_loopback(host):
        raise ToolshellError(ErrorCode.INVALID_INPUT, f"--no-auth serves loopback addresses only, not {host}")
    if not http and config.audit.enabled and config.audit.to == "stdout":
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            '[audit] to = "stdout" cannot share stdout with the stdio transport; use to = "file", or serve --http',
        )
    name_process_options(config_path, state_dir, config)  # the grant hint names them
    # Answer `initialize` at once: servers keep starting in the background, the first `tools/list`
    # waits for them up to `list_wait_seconds`, and a call that names one waits for it. Only
    # `keep_visible` tools must be listed before serving.
    config = config.model_copy(update={"startup_wait_seconds": 0.0})
    notifier = ListNotifier(config.serve.list_wait_seconds)  # the first `tools/list` waits for them a while
    threading.Thread(target=secrets_scan.warm, name="toolshell-scan-warm", daemon=True).start()  # `[scan]`'s first use
    async with Host.open(config, state_dir=state_dir, on_wait=say_waiting, on_server_progress=notifier.progress) as h:
        visible = await h.visible_tools() if config.tools_in_shell.keep_visible else []
        server = build_server(h, visible, notifier=notifier)
        t = config.telemetry
        if h.metrics is not None and t.prometheus_port is not None:  # metrics: the scrape port
            scrape = h.metrics.serve_prometheus(t.prometheus_host, t.prometheus_port, t.prometheus_token_env)
            print(f"toolshell: Prometheus metrics on {scrape}", file=sys.stderr, flush=True)
        async with registered(h, config.serve.heartbeat_seconds):
            if http:
                gate = NO_AUTH if no_auth else _gate(config, h, host, port)
                events = open_event_log(config.serve.event_store, h.store)
                await _serve_http(server, host, port, gate, events, ui=h, web=config.serve.web, worker=worker)
            else:
                # lazy: only the transport in use is imported
                from mcp.server.stdio import stdio_server

                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())


def _gate(config: Config, host: Host, bind: str, port: int) -> Gate:
    if config.serve.oauth is not None:
        from toolshell.frontends.serve.oauth import oauth_gate  # lazy: JWT and JWKS only for OAuth

        return oauth_gate(config.serve.oauth, bind, port, os.environ)
    return token_gate(serve_token(host.state_dir), state_ring(host))


async def _serve_http(
    server: Server[Any],
    host: str,
    port: int,
    gate: Gate,
    events: EventLog | None = None,
    ui: Host | None = None,
    web: bool = True,
    worker: WorkerSlot | None = None,
) -> None:
    """Streamable HTTP on 127.0.0.1 by default, with Host/Origin checks (DNS-rebinding protection,
    `frontends.serve.hosts`), `/mcp` behind `gate` (its metadata routes public), forwarded headers
    believed from trusted proxies only (`frontends.serve.forwarded`), the probes `/healthz` and
    `/readyz` (`frontends.serve.health`), and a drain on SIGTERM (`frontends.serve.drain`). SSE
    events get ids kept in `events` (in memory by default), so a dropped stream can be resumed.
    With `ui` (the serving host: its settings, probes), the web page of that host is served under
    `/ui/` too, with the fleet's page token (`frontends.web.serve.ui_mount`), unless `web` is off.
    A request to `/mcp` takes a short path past Starlette's middleware and router (`frontends.serve.app`)."""
    import uvicorn  # lazy: only the transport in use is imported

    built = http_app(server, host, port, gate, events, ui, web, worker)
    app, drain, page = built.app, built.drain, built.page
    if gate is NO_AUTH:
        print("toolshell: WARNING: --no-auth: any local user or process can call this server", file=sys.stderr)
    print(f"toolshell serving MCP on http://{host}:{port}/mcp ({gate.how}){page}", file=sys.stderr, flush=True)
    # uvicorn's own proxy headers are off: only `ForwardedHeaders` decides whom to believe. httptools (llhttp, a
    # dependency) parses requests in C: a fraction of h11's CPU on every call (benchmarks/README.md, issue 31 round 4).
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http="httptools",
        log_level="warning",
        proxy_headers=False,
        timeout_graceful_shutdown=CLOSE_SECONDS,
    )
    started = worker.started if worker is not None else None
    await DrainingServer(config, drain, started).serve(sockets=[worker.socket] if worker is not None else None)
