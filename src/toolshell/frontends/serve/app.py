"""The ASGI app of `serve --http`: `/mcp` on a short path, the rest through Starlette.

Every `bash` call is a POST to `/mcp`, so that path skips Starlette's error and exception
middleware and its router (they wrap each `send` too) and goes straight to the same guarded app
the router holds: the drain (`drain`), the auth gate (`auth`), `[[limits]]` (`limited`), the SDK's
body limit and its Host/Origin checks (`hosts`), with the forwarded headers of trusted proxies
applied first (`forwarded`) as for every other path. Any other path (`/mcp/` included, which the
router redirects), and the lifespan, go through Starlette as before: the probes, the OAuth
metadata routes and the web page. An error on the short path reaches uvicorn, which answers 500
as Starlette's error middleware would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server import Server
from starlette.types import ASGIApp, Receive, Scope, Send

from toolshell.config.serve import ServeConfig
from toolshell.frontends.serve.auth import Gate
from toolshell.frontends.serve.drain import Drain
from toolshell.frontends.serve.event_store import EventLog, MemoryEventStore, ResumableSessionManager
from toolshell.frontends.serve.forwarded import ForwardedHeaders
from toolshell.frontends.serve.health import Readiness, health_routes
from toolshell.frontends.serve.hosts import host_checks
from toolshell.frontends.serve.limited import limited
from toolshell.frontends.serve.processes import WorkerSlot
from toolshell.frontends.serve.tasks.yielding import drain_yields, running_yields
from toolshell.frontends.serve.upstream import live_runs
from toolshell.host import Host

MCP_PATH = "/mcp"


class Front:
    """The app uvicorn calls: forwarded headers applied, then `/mcp` to `mcp`, anything else to `rest`."""

    def __init__(self, mcp: ASGIApp, rest: ASGIApp, forwarded: ForwardedHeaders) -> None:
        self.mcp, self.rest, self.forwarded = mcp, rest, forwarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http" or kind == "websocket":
            scope = self.forwarded.applied(scope)
            if kind == "http" and scope["path"] == MCP_PATH:
                scope["app"] = self.rest  # as Starlette would set it, for anything that reads `request.app`
                await self.mcp(scope, receive, send)
                return
        await self.rest(scope, receive, send)


@dataclass
class HttpApp:
    """What `serve --http` serves: the app, its drain, and the page's address line (or "")."""

    app: ASGIApp
    drain: Drain
    page: str


def http_app(
    server: Server[Any],
    host: str,
    port: int,
    gate: Gate,
    events: EventLog | None = None,
    ui: Host | None = None,
    web: bool = True,
    worker: WorkerSlot | None = None,
) -> HttpApp:
    """The app of `server` bound to `host:port` (`server._serve_http` says what each part does)."""
    # lazy: only the transport in use is imported
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from starlette.applications import Starlette
    from starlette.routing import Route

    serve_config = ui.config.serve if ui is not None else ServeConfig()
    drain = Drain(serve_config.drain_seconds)
    # The drain waits for parked and yielded runs; at SIGTERM the calls waiting to yield yield at once.
    server.lifespan = drain.watching(server.lifespan, lambda p: live_runs(p) + running_yields(p), drain_yields)
    security = host_checks(host, port, serve_config.allowed_hosts)
    manager = ResumableSessionManager(
        server, MemoryEventStore() if events is None else events, security_settings=security
    )
    mcp: Any = StreamableHTTPASGIApp(manager)
    if ui is not None:  # `[[limits]]` / `[[quotas]]`: 429 at the transport (the caller is known inside the gate)
        mcp = limited(mcp, ui.policy.limits)
    mcp_app = drain.guard(gate.wrap(mcp), mcp=True)
    routes: list[Any] = [Route(MCP_PATH, endpoint=mcp_app), *gate.public_routes]
    page = ""
    if ui is not None:
        pod = worker.not_ready if worker is not None else None  # ready when every worker of the machine is
        routes += health_routes(Readiness(ui.store, serve_config, ui.state_dir, drain, pod))
    if ui is not None and web:  # `[serve] web = false`: no page
        from toolshell.frontends.web.serve import ui_mount  # lazy: the page is needed only over HTTP

        mount, url = ui_mount(ui, host, port, gate)
        routes.append(mount)
        page = f"; the web page is on {url}"
    rest = Starlette(routes=routes, lifespan=lambda _: manager.run())
    forwarded = ForwardedHeaders(rest, serve_config.trusted_proxies, serve_config.forwarded_header)
    app: ASGIApp = Front(mcp_app, rest, forwarded)
    if worker is not None:
        app = worker.tagged(app)
    return HttpApp(app, drain, page)


__all__ = ["MCP_PATH", "Front", "HttpApp", "http_app"]
