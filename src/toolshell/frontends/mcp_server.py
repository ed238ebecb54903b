"""`toolshell serve`: an MCP server that exposes `bash` (plus any `keep_visible` tools).

The agent host configures this one server instead of twenty. Each `bash` call is one shell call in
a session of its own per upstream connection; the result is the JSON object of `RunResult`.
Elicitation from a server during a script goes to the upstream client when it declared the
elicitation capability, and is declined otherwise.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.frontends.console import say_waiting
from toolshell.frontends.event_store import EventLog, MemoryEventStore, ResumableSessionManager, open_event_log
from toolshell.host import Host
from toolshell.registry.entry import ToolEntry
from toolshell.session import Session

BASH_DESCRIPTION = """Run a bash script in a sandboxed shell (no host files, network or environment).
Inside it, `tools` calls every tool of every configured MCP server:
  tools --help                      list servers and tools
  tools <server> --help             one server's tools
  tools <server> <tool> --help      a tool's input schema
  tools search <words>              find tools
  tools <server> <tool> k=v --flag '{"json": 1}'   call (stdin JSON works too)
  tools plan <<'EOF' … EOF          what a script would call, with risk
Filter results with jq and print only what you need. Errors are one JSON line on stderr, exit 1.
Fan out with & and wait: `tools a x > a.json & tools b y > b.json & wait` runs both calls at once.
Pipes get whole results; output past the cap keeps head and tail and names a file holding all of it."""

BASH_SCHEMA = {
    "type": "object",
    "properties": {"script": {"type": "string", "description": "The bash script to run."}},
    "required": ["script"],
    "additionalProperties": False,
}


class UpstreamAnswerer:
    """Asks the upstream MCP client (when it declared elicitation) on behalf of a server."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self.ctx = ctx

    async def elicit(self, server: str, params: Any) -> types.ElicitResult:
        caps = self.ctx.session.client_capabilities
        if caps is None or caps.elicitation is None:
            return types.ElicitResult(action="decline")
        message = f"[{server}] {getattr(params, 'message', '')}"
        schema = getattr(params, "requested_schema", None) or {"type": "object", "properties": {}}
        return await self.ctx.session.elicit_form(message, schema, related_request_id=self.ctx.request_id)


def build_server(host: Host, keep_visible: list[ToolEntry]) -> Server[Any]:
    """The lowlevel server: `bash` plus proxies for the `keep_visible` tools."""
    # One toolshell session (one shell, its files and variables) per upstream client: over stdio the
    # process serves one client; over HTTP, one per `Mcp-Session-Id`. A stateless HTTP request gets
    # a fresh shell: sharing one between clients that cannot be told apart would leak their files.
    sessions: OrderedDict[str, Session] = OrderedDict()
    visible = {e.flat_name: e for e in keep_visible}

    def session_for(ctx: ServerRequestContext[Any]) -> Session:
        key = _client_key(ctx)
        if key is None:
            return host.session(source="agent")  # a stateless client: a fresh shell per call
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = host.session(source="agent")
            if len(sessions) > MAX_SESSIONS:
                _, oldest = sessions.popitem(last=False)
                oldest.close()
        sessions.move_to_end(key)
        return session

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        tools = [types.Tool(name="bash", description=BASH_DESCRIPTION, input_schema=BASH_SCHEMA)]
        tools += [
            types.Tool(name=flat, description=e.description, input_schema=e.input_schema) for flat, e in visible.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        session = session_for(ctx)
        args = dict(params.arguments or {})
        if params.name == "bash":
            script = args.get("script")
            if not isinstance(script, str):
                return error_result(ToolshellError(ErrorCode.INVALID_INPUT, 'bash takes {"script": "<bash script>"}'))
            result = await session.run(script, answerer=UpstreamAnswerer(ctx))
            if _client_key(ctx) is None:
                session.close()
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(result.to_json(), ensure_ascii=False))],
                is_error=not result.success,
            )
        entry = visible.get(params.name)
        if entry is None:
            unknown = f"no tool {params.name!r}; call `bash` and use `tools --help` inside it"
            return error_result(ToolshellError(ErrorCode.UNKNOWN_COMMAND, unknown))
        try:
            direct: types.CallToolResult = await session.call_tool(entry.server, entry.name, args)
            return direct
        except ToolshellError as e:
            return error_result(e)

    return Server("toolshell", on_list_tools=list_tools, on_call_tool=call_tool)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


MAX_SESSIONS = 64
"""HTTP clients whose sessions are kept; the least recently used one is closed past this."""


def _client_key(ctx: ServerRequestContext[Any]) -> str | None:
    """Who is calling: the stdio client, an HTTP session, or None for a stateless HTTP request
    (2026-07-28 requests carry no session id, so two clients cannot be told apart)."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return "stdio"
    session_id = headers.get("mcp-session-id")
    return f"http:{session_id}" if session_id else None


async def serve(config: Config, state_dir: str | None, *, http: bool, host: str, port: int) -> None:
    async with Host.open(config, state_dir=state_dir, on_wait=say_waiting) as h:
        server = build_server(h, await h.visible_tools())
        if http:
            await _serve_http(server, host, port, open_event_log(config.serve.event_store, h.store))
        else:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Server[Any], host: str, port: int, events: EventLog | None = None) -> None:
    """Streamable HTTP on 127.0.0.1 by default, with Host/Origin checks (DNS-rebinding protection).
    SSE events get ids kept in `events` (in memory by default), so a dropped stream can be resumed."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{host}:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://{host}:{port}"],
    )
    manager = ResumableSessionManager(
        server, MemoryEventStore() if events is None else events, security_settings=security
    )
    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lambda _: manager.run())
    print(f"toolshell serving MCP on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
