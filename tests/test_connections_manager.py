"""The connection manager: concurrent startup, lazy servers, diagnostics, closing everything."""

from __future__ import annotations

import uuid

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer

from _connections_support import builtin_config, processes_with_env, stdio_config
from toolshell.config import ServerConfig
from toolshell.connections import ConnectionManager
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.errors import ToolshellError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hello_server() -> MCPServer:
    server = MCPServer("hello", log_level="WARNING")

    @server.tool()
    def hello() -> str:
        return "hello"

    return server


@pytest.mark.anyio
async def test_one_broken_or_hung_server_neither_blocks_nor_breaks_the_others() -> None:
    mark = {"TOOLSHELL_TEST_MARK": uuid.uuid4().hex}
    servers = [
        builtin_config("inproc"),
        stdio_config("good", env=mark),
        stdio_config("stuck", "hang-startup", env=mark, startup_timeout_seconds=2),
        stdio_config("chatty", "only-noise", env=mark, startup_timeout_seconds=1),
        stdio_config("lazy", env=mark, load="on_demand"),
        stdio_config("off", env=mark, enabled=False),
    ]
    progress: list[tuple[str, ConnState]] = []
    good_ready = anyio.Event()

    def on_progress(server: str, state: ConnState) -> None:
        progress.append((server, state))
        if (server, state) == ("good", ConnState.READY):
            good_ready.set()

    manager = ConnectionManager(servers, {"inproc": hello_server})
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.start_all, on_progress)
            with anyio.fail_after(5):
                await good_ready.wait()
            # The good server answers while the stuck one is still inside its startup timeout.
            result = await (await manager.get("good")).call_tool("echo", {"text": "meanwhile"}, CallOptions())
            assert result.content == [types.TextContent(type="text", text="meanwhile")]
            assert manager.connection("stuck").status().state is ConnState.CONNECTING  # type: ignore[union-attr]
        states = {s.name: s.state for s in manager.statuses()}
        assert states == {
            "inproc": ConnState.READY,
            "good": ConnState.READY,
            "stuck": ConnState.FAILED,
            "chatty": ConnState.FAILED,
            "lazy": ConnState.NOT_LOADED,
            "off": ConnState.DISABLED,
        }
        assert sorted(progress) == sorted(
            [(name, ConnState.CONNECTING) for name in ("inproc", "good", "stuck", "chatty")]
            + [("inproc", ConnState.READY), ("good", ConnState.READY)]
            + [("stuck", ConnState.FAILED), ("chatty", ConnState.FAILED)]
        )
        lazy = await manager.get("lazy")
        assert [t.name for t in await lazy.list_tools(SessionContext())] == ["echo", "crash", "hang", "pids"]
        assert manager.connection("lazy").status().state is ConnState.READY  # type: ignore[union-attr]
        with pytest.raises(ToolshellError, match="server 'stuck' could not start: no answer to the MCP handshake"):
            await manager.get("stuck")
    finally:
        await manager.aclose()
    assert processes_with_env(f"TOOLSHELL_TEST_MARK={mark['TOOLSHELL_TEST_MARK']}") == []
    assert {s.state for s in manager.statuses()} == {ConnState.CLOSED, ConnState.DISABLED}


@pytest.mark.anyio
async def test_closing_finishes_even_when_the_caller_is_being_cancelled() -> None:
    mark = {"TOOLSHELL_TEST_MARK": uuid.uuid4().hex}
    manager = ConnectionManager([stdio_config("good", "spawn-child", env=mark)])
    await manager.start_all()
    assert processes_with_env(f"TOOLSHELL_TEST_MARK={mark['TOOLSHELL_TEST_MARK']}") != []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await manager.aclose()
    assert processes_with_env(f"TOOLSHELL_TEST_MARK={mark['TOOLSHELL_TEST_MARK']}") == []
    assert manager.statuses()[0].state is ConnState.CLOSED


@pytest.mark.anyio
async def test_an_on_demand_server_is_opened_once_however_many_ask_at_once() -> None:
    built: list[MCPServer] = []

    def factory() -> MCPServer:
        built.append(hello_server())
        return built[-1]

    manager = ConnectionManager([builtin_config("lazy", load="on_demand")], {"lazy": factory})
    try:
        await manager.start_all()
        assert built == []
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(manager.get, "lazy")
    finally:
        await manager.aclose()
    assert len(built) == 1


@pytest.mark.anyio
async def test_unknown_and_disabled_servers_are_clear_errors() -> None:
    servers = [builtin_config("a"), ServerConfig(name="b", type="builtin", enabled=False)]
    async with ConnectionManager(servers, {"a": hello_server}) as manager:
        with pytest.raises(ToolshellError) as unknown:
            await manager.get("c")
        with pytest.raises(ToolshellError) as disabled:
            await manager.get("b")
    assert unknown.value.message == "no server is named 'c' (configured: a, b)"
    assert disabled.value.message == "server 'b' is disabled; set enabled = true for it in the config"


@pytest.mark.anyio
async def test_a_status_tells_what_the_servers_command_shows() -> None:
    async with ConnectionManager([stdio_config("good")]) as manager:
        await manager.start_all()
        conn = await manager.get("good")
        await conn.list_tools(SessionContext())
        status = manager.statuses()[0].to_json()
    assert status == {
        "name": "good",
        "type": "stdio",
        "state": "ready",
        "load": "startup",
        "protocol_version": "2025-11-25",
        "tool_count": 4,
        "last_error": None,
        "stderr_tail": ["stdio-test-server starting", "listing tools"],
        "restarts": 0,
        "auth_reason": None,
    }
