"""Tool lists through a connection: cached per server, refreshed by list_changed, private per session."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.mcpserver import Context, MCPServer

from _connections_support import FakeClock, builtin_config
from toolshell.connections import SESSION_META_KEY
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.errors import ToolshellError

ONE = SessionContext(session_id="s1")
TWO = SessionContext(session_id="s2")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def growing_server() -> MCPServer:
    """A server whose tools `add_quietly` / `add_loudly` add a tool, without / with telling clients."""
    server = MCPServer("growing", log_level="WARNING")

    def extra() -> str:
        return "extra"

    @server.tool()
    async def add_quietly(name: str) -> str:
        server.add_tool(extra, name=name)
        return "added"

    @server.tool()
    async def add_loudly(name: str, ctx: Context) -> str:
        server.add_tool(extra, name=name)
        if ctx.protocol_version == "2025-11-25":
            await ctx.request_context.session.send_tool_list_changed()
        else:
            await ctx.notify_tools_changed()  # 2026-07-28: through the subscriptions/listen stream
        return "added"

    return server


def names(tools: list[types.Tool]) -> list[str]:
    return sorted(t.name for t in tools)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_list_is_cached_until_the_server_says_tools_list_changed(mode: str) -> None:
    conn = make_connection(builtin_config(), growing_server, mode=mode)
    changed = anyio.Event()
    conn.on_tools_changed = lambda server: changed.set()
    try:
        assert names(await conn.list_tools(ONE)) == ["add_loudly", "add_quietly"]
        await conn.call_tool("add_quietly", {"name": "hidden"}, CallOptions(session=ONE))
        assert names(await conn.list_tools(ONE)) == ["add_loudly", "add_quietly"]
        await conn.call_tool("add_loudly", {"name": "shown"}, CallOptions(session=ONE))
        with anyio.fail_after(5):
            await changed.wait()
        assert names(await conn.list_tools(ONE)) == ["add_loudly", "add_quietly", "hidden", "shown"]
        assert conn.status().tool_count == 4
    finally:
        await conn.close()


def per_session_server(scope: str, fetches: list[str]) -> Server[Any]:
    """A low-level server whose tools name the calling session; it marks its list `scope`."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        session = ((params.meta if params else None) or {}).get(SESSION_META_KEY, {})
        sid = session.get("session_id", "?")
        fetches.append(sid)
        tool = types.Tool(name=f"tool_for_{sid}", input_schema={"type": "object"})
        return types.ListToolsResult(tools=[tool], cache_scope=scope)  # type: ignore[arg-type]

    return Server("per-session", on_list_tools=list_tools)


@pytest.mark.anyio
async def test_a_private_list_is_fetched_and_kept_per_session() -> None:
    fetches: list[str] = []
    conn = make_connection(builtin_config(), lambda: per_session_server("private", fetches))
    try:
        lists = [names(await conn.list_tools(s)) for s in (ONE, TWO, ONE, TWO)]
        assert fetches == ["s1", "s2"]
        conn.cancel_session("s1")  # the session ended: its private list goes with it
        assert names(await conn.list_tools(ONE)) == ["tool_for_s1"]
    finally:
        await conn.close()
    assert lists == [["tool_for_s1"], ["tool_for_s2"], ["tool_for_s1"], ["tool_for_s2"]]
    assert fetches == ["s1", "s2", "s1"]


@pytest.mark.anyio
async def test_a_public_list_is_fetched_once_and_shared_by_every_session() -> None:
    fetches: list[str] = []
    conn = make_connection(builtin_config(), lambda: per_session_server("public", fetches))
    try:
        lists = [names(await conn.list_tools(s)) for s in (ONE, TWO, ONE)]
    finally:
        await conn.close()
    assert lists == [["tool_for_s1"]] * 3
    assert fetches == ["s1"]


@pytest.mark.anyio
async def test_a_handshake_connection_shares_the_list_whatever_the_sdk_model_defaults_to() -> None:
    fetches: list[str] = []
    conn = make_connection(builtin_config(), lambda: per_session_server("private", fetches), mode="legacy")
    try:
        lists = [names(await conn.list_tools(s)) for s in (ONE, TWO)]
    finally:
        await conn.close()
    # cacheScope does not exist before 2026-07-28: the list is the server's, not the session's.
    assert lists == [["tool_for_s1"], ["tool_for_s1"]]
    assert fetches == ["s1"]


def paging_server(pages: list[list[str]]) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        index = int(params.cursor) if params and params.cursor else 0
        tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in pages[index]]
        more = str(index + 1) if index + 1 < len(pages) else None
        return types.ListToolsResult(tools=tools, next_cursor=more, cache_scope="public")

    return Server("paging", on_list_tools=list_tools)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_page_of_a_paginated_list_is_collected(mode: str) -> None:
    pages = [["a", "b"], ["c"], ["d", "e"]]
    conn = make_connection(builtin_config(), lambda: paging_server(pages), mode=mode)
    try:
        tools = await conn.list_tools(ONE)
    finally:
        await conn.close()
    assert [t.name for t in tools] == ["a", "b", "c", "d", "e"]


def slow_to_list_server(listings: list[str]) -> Server[Any]:
    """A server that connects but never answers its first `tools/list`; later ones are answered."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        listings.append("asked")
        if len(listings) == 1:
            await anyio.sleep_forever()
        return types.ListToolsResult(tools=[types.Tool(name="late", input_schema={"type": "object"})])

    return Server("slow-to-list", on_list_tools=list_tools)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_server_that_does_not_answer_tools_list_fails_and_is_reopened_after_the_backoff(mode: str) -> None:
    listings: list[str] = []
    clock = FakeClock()
    config = builtin_config("mute", timeout_seconds=0.2)
    conn = make_connection(config, lambda: slow_to_list_server(listings), clock=clock, mode=mode)
    errors = []
    try:
        await conn.start()
        with pytest.raises(ToolshellError) as timed_out:
            await conn.list_tools(ONE)
        errors.append(timed_out.value.to_json()["error"])
        failed = conn.status()
        # Later listings (the next catalog build) and starts fail at once, without asking the server.
        for again in (lambda: conn.list_tools(ONE), conn.start):
            with pytest.raises(ToolshellError) as waiting:
                await again()
            errors.append(waiting.value.to_json()["error"])
        assert listings == ["asked"]
        clock.advance(1.0)
        await conn.start()  # a call that names the server reopens it
        tools = await conn.list_tools(ONE)
        reopened = conn.status()
    finally:
        await conn.close()
    message = "server 'mute' did not answer tools/list within 0.2s"
    retry = {"code": "unavailable", "message": f"{message}; a call after 1s will start it again", "retryable": True}
    assert errors == [{"code": "unavailable", "message": message, "retryable": True}, retry, retry]
    assert (failed.state, failed.last_error) == (ConnState.FAILED, message)
    assert [t.name for t in tools] == ["late"]
    assert (reopened.state, reopened.last_error, reopened.restarts) == (ConnState.READY, None, 1)
