"""A 401/403 at any point (initialize, tools/list, a call) is `connection_required` and state `needs_auth`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.from_thread
import pytest
from click.testing import CliRunner
from mcp.server.mcpserver import MCPServer

from _connections_support import serve_http
from toolshell import Host
from toolshell.config import Config, ServerConfig
from toolshell.config.models import McpSection
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError
from toolshell.frontends.cli import main

CHALLENGE = b'Bearer error="invalid_token", error_description="token revoked"'
REASON = 'invalid_token: "token revoked"'


class LateRefusal:
    """ASGI middleware: lets the handshake through, then answers 401 to tools/list and tools/call."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        message = await receive()
        body = message.get("body", b"")
        if b'"method":"tools/' in body:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", CHALLENGE)]})
            await send({"type": "http.response.body", "body": b""})
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return message
            return dict(await receive())

        await self.app(scope, replay, send)


def sec_server() -> MCPServer:
    server = MCPServer("sec", log_level="WARNING")

    @server.tool()
    def secret() -> str:
        """Never reached."""
        return "s"

    return server


def sec_config(url: str) -> ServerConfig:
    return ServerConfig(name="sec", type="http", url=url, headers={"Authorization": "Bearer stale"})


@pytest.mark.anyio
async def test_a_401_after_initialize_is_connection_required_at_listing_and_at_a_call() -> None:
    async with serve_http(LateRefusal(sec_server().streamable_http_app())) as url:
        conn = make_connection(sec_config(url))
        try:
            await conn.start()
            with pytest.raises(ToolshellError) as listing:
                await conn.list_tools(SessionContext())
            status = conn.status()
            with pytest.raises(ToolshellError) as calling:
                await conn.call_tool("secret", {}, CallOptions())
        finally:
            await conn.close()
    assert listing.value.to_json()["error"] == {
        "code": "connection_required",
        "message": f"server 'sec' refused us (HTTP 401: {REASON}) while listing tools; it needs authorization: "
        'set headers = { Authorization = "Bearer …" } for it in the config',
        "retryable": False,
    }
    assert (status.state, status.auth_reason) == (ConnState.NEEDS_AUTH, REASON)
    assert calling.value.code == "connection_required" and "while calling 'secret'" in calling.value.message


@pytest.mark.anyio
async def test_a_401_after_initialize_shows_in_help_at_a_call_and_in_servers(tmp_path: Any) -> None:
    async with serve_http(LateRefusal(sec_server().streamable_http_app())) as url:
        config = Config(mcp=McpSection(servers=[sec_config(url)]))
        async with Host.open(config) as host:
            await host.run("tools sec --help")  # the first listing meets the 401
            listed = await host.run("tools --help")
            server_help = await host.run("tools sec --help")
            called = await host.run("tools sec secret")
            statuses = {s.name: s.to_json() for s in host.statuses()}
    error = json.loads(called.stderr.strip().splitlines()[-1])["error"]
    assert (called.exit_code, error["code"], error["retryable"]) == (1, "connection_required", False)
    assert "sec" in listed.stdout and "(needs login)" in listed.stdout.split("sec", 1)[1].splitlines()[0]
    assert server_help.stdout == "tools sec <tool>: 0 tools (needs login)\n"
    assert statuses["sec"]["state"] == "needs_auth" and statuses["sec"]["auth_reason"] == REASON


def test_toolshell_servers_shows_needs_auth_with_the_servers_reason(tmp_path: Any) -> None:
    app = LateRefusal(sec_server().streamable_http_app())
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(serve_http(app)) as url:
        config_file = tmp_path / "toolshell.toml"
        config_file.write_text(
            f'[[mcp.servers]]\nname = "sec"\ntype = "http"\nurl = "{url}"\nheaders = {{ Authorization = "Bearer x" }}\n'
        )
        shown = CliRunner().invoke(main, ["servers", "--config", str(config_file)])
        shown_json = CliRunner().invoke(main, ["servers", "--config", str(config_file), "--json"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0].split()[:3] == ["sec", "http", "needs_auth"]
    assert f"    needs login: {REASON}" in shown.stdout.splitlines()
    row = json.loads(shown_json.stdout)[0]
    assert (row["state"], row["auth_reason"]) == ("needs_auth", REASON)


@pytest.mark.anyio
async def test_the_very_first_help_after_a_401_says_needs_login() -> None:
    async with serve_http(LateRefusal(sec_server().streamable_http_app())) as url:
        async with Host.open(Config(mcp=McpSection(servers=[sec_config(url)]))) as host:
            first = await host.run("tools sec --help")
    assert first.stdout == "tools sec <tool>: 0 tools (needs login)\n"
