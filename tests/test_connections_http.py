"""Streamable HTTP servers: configured headers, 401 → connection_required, session 404 → new session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer

from _connections_support import serve_http
from toolshell.config import ServerConfig
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError

ANY = CallOptions()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Gate:
    """ASGI middleware: checks a bearer token, and can forget sessions (answering 404 for them)."""

    def __init__(self, app: Any, token: str = "Bearer good") -> None:
        self.app = app
        self.token = token.encode()
        self.forgotten: set[bytes] = set()
        self.sessions: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            session = headers.get(b"mcp-session-id")
            if session and session not in self.sessions:
                self.sessions.append(session)
            status = 401 if headers.get(b"authorization") != self.token else 404 if session in self.forgotten else 0
            if status:
                await send({"type": "http.response.start", "status": status, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)


def web_server() -> MCPServer:
    server = MCPServer("web", log_level="WARNING")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        headers = ctx.headers or {}
        return json.dumps({"auth": headers.get("authorization"), "version": ctx.protocol_version})

    return server


def http_config(url: str, token: str) -> ServerConfig:
    return ServerConfig(name="web", type="http", url=url, headers={"Authorization": token})


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_configured_headers_reach_the_server(mode: str, version: str) -> None:
    async with serve_http(Gate(web_server().streamable_http_app())) as url:
        conn = make_connection(http_config(url, "Bearer good"), mode=mode)
        try:
            result = await conn.call_tool("whoami", {}, ANY)
        finally:
            await conn.close()
    assert json.loads(result.content[0].text) == {"auth": "Bearer good", "version": version}


@pytest.mark.anyio
async def test_an_http_401_is_connection_required() -> None:
    async with serve_http(Gate(web_server().streamable_http_app())) as url:
        conn = make_connection(http_config(url, "Bearer wrong"))
        try:
            with pytest.raises(ToolshellError) as caught:
                await conn.start()
        finally:
            await conn.close()
    assert caught.value.to_json() == {
        "error": {
            "code": "connection_required",
            "message": "server 'web' refused us (HTTP 401) while starting; it needs authorization: "
            'set headers = { Authorization = "Bearer …" } for it in the config',
            "retryable": False,
        }
    }


@pytest.mark.anyio
async def test_after_a_session_404_a_new_session_is_opened_and_the_call_retried_once() -> None:
    gate = Gate(web_server().streamable_http_app())
    async with serve_http(gate) as url:
        conn = make_connection(http_config(url, "Bearer good"), mode="legacy")
        try:
            await conn.list_tools(SessionContext())
            assert len(gate.sessions) == 1
            gate.forgotten.add(gate.sessions[0])
            result = await conn.call_tool("whoami", {}, ANY)
            status = conn.status()
        finally:
            await conn.close()
    assert json.loads(result.content[0].text)["auth"] == "Bearer good"
    assert len(gate.sessions) == 2
    assert (status.state, status.restarts) == (ConnState.READY, 1)


@pytest.mark.anyio
async def test_an_unreachable_url_fails_to_start_and_may_be_retried() -> None:
    async with serve_http(Gate(web_server().streamable_http_app())) as url:
        pass  # the port is free again: nothing listens there now
    conn = make_connection(http_config(url, "Bearer good"))
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.start()
    finally:
        await conn.close()
    assert caught.value.retryable
    assert caught.value.message.startswith("server 'web' could not start: cannot reach server 'web' while starting:")
