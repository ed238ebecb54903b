"""Tool calls through a connection to an in-process MCP server: timeouts, cancellation, context."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from _connections_support import FakeClock, builtin_config
from toolshell.connections import SESSION_META_KEY
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.connections.translate import Situation, translate
from toolshell.errors import ErrorCode, ToolshellError

MODES = ["auto", "legacy"]  # 2026-07-28 (per-request) and 2025-11-25 (handshake) connections


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Probe:
    """What the server saw, for assertions."""

    def __init__(self) -> None:
        self.cancelled = anyio.Event()
        self.started = anyio.Event()


def make_server(probe: Probe) -> MCPServer:
    server = MCPServer("calls", log_level="WARNING")

    @server.tool()
    async def steady(steps: int, gap: float, ctx: Context) -> str:
        """Report progress every `gap` seconds, `steps` times."""
        for i in range(steps):
            await anyio.sleep(gap)
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "finished"

    @server.tool()
    async def hang(ctx: Context) -> str:
        probe.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            probe.cancelled.set()
            raise
        return "never"

    @server.tool()
    async def fails() -> str:
        raise ToolError("the tool broke")

    @server.tool()
    async def context(ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        caps = ctx.client_capabilities
        experimental = (caps.experimental or {}) if caps else {}
        return json.dumps({"meta": meta.get(SESSION_META_KEY), "capability": experimental.get("session")})

    return server


def connect(probe: Probe, mode: str, **config: Any):
    return make_connection(builtin_config(**config), lambda: make_server(probe), mode=mode)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_progress_refreshes_the_idle_timeout(mode: str) -> None:
    conn = connect(Probe(), mode, timeout_seconds=2.0)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    try:
        # Ten gaps of 0.25 s: each far shorter than the 2 s idle timeout (so a busy machine cannot
        # stretch one past it), together longer.
        result = await conn.call_tool("steady", {"steps": 10, "gap": 0.25}, CallOptions(on_progress=on_progress))
    finally:
        await conn.close()
    assert result.content == [types.TextContent(type="text", text="finished")]
    assert seen == [(float(i), 10.0, f"step {i}") for i in range(1, 11)]


@pytest.mark.anyio
async def test_a_call_without_progress_times_out_and_the_server_handler_is_cancelled() -> None:
    probe = Probe()
    conn = connect(probe, "auto", timeout_seconds=0.2)
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.call_tool("hang", {}, CallOptions())
        with anyio.fail_after(5):
            await probe.cancelled.wait()
    finally:
        await conn.close()
    assert caught.value.to_json() == {
        "error": {
            "code": "unavailable",
            "message": "server 'b' tool 'hang' timed out after 0.2s without progress",
            "retryable": True,
        }
    }


@pytest.mark.anyio
async def test_a_timed_out_call_sends_notifications_cancelled_on_a_handshake_connection() -> None:
    probe = Probe()
    conn = connect(probe, "legacy")
    try:
        with pytest.raises(ToolshellError, match="timed out after 0.2s without progress"):
            await conn.call_tool("hang", {}, CallOptions(timeout_seconds=0.2))
        # Over JSON-RPC the handler is cancelled only by the `notifications/cancelled` it receives.
        with anyio.fail_after(5):
            await probe.cancelled.wait()
    finally:
        await conn.close()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_caller_that_gives_up_cancels_the_call_on_the_server(mode: str) -> None:
    probe = Probe()
    conn = connect(probe, mode, timeout_seconds=30)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.call_tool, "hang", {}, CallOptions())
            with anyio.fail_after(5):
                await probe.started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            await probe.cancelled.wait()
    finally:
        await conn.close()


@pytest.mark.anyio
async def test_progress_does_not_outlast_the_absolute_cap_of_twenty_idle_timeouts() -> None:
    conn = connect(Probe(), "auto", timeout_seconds=0.1)
    try:
        with pytest.raises(ToolshellError) as caught:
            # Progress every 0.01 s keeps the 0.1 s idle timer alive for 20 s; the 2 s cap ends it.
            # (The idle and cap arithmetic itself is tested on a fake clock in test_connections_timer.)
            await conn.call_tool("steady", {"steps": 2000, "gap": 0.01}, CallOptions())
    finally:
        await conn.close()
    assert caught.value.to_json() == {
        "error": {
            "code": "unavailable",
            "message": "server 'b' tool 'steady' ran past its absolute cap of 2s (20 × the idle timeout)",
            "retryable": True,
        }
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_error_is_returned_as_a_result_not_raised(mode: str) -> None:
    conn = connect(Probe(), mode)
    try:
        result = await conn.call_tool("fails", {}, CallOptions())
    finally:
        await conn.close()
    assert result.is_error is True
    assert result.content == [types.TextContent(type="text", text="Error executing tool fails: the tool broke")]


@pytest.mark.anyio
async def test_the_server_reads_the_calling_session_from_every_request_on_a_2026_connection() -> None:
    conn = connect(Probe(), "auto")
    one = SessionContext(session_id="s1", role="developer", workdir="/w/one", git=True, context_epoch=3)
    two = SessionContext(session_id="s2", role="reviewer", workdir="/w/two", shell=False)
    try:
        first = await conn.call_tool("context", {}, CallOptions(session=one))
        second = await conn.call_tool("context", {}, CallOptions(session=two))
        assert conn.status().protocol_version == "2026-07-28"
    finally:
        await conn.close()
    assert json.loads(first.content[0].text) == {"meta": one.to_json(), "capability": one.to_json()}
    assert json.loads(second.content[0].text) == {"meta": two.to_json(), "capability": two.to_json()}


@pytest.mark.anyio
async def test_a_handshake_connection_carries_the_opening_session_in_initialize_and_each_in_meta() -> None:
    conn = connect(Probe(), "legacy")
    one = SessionContext(session_id="s1", role="developer")
    two = SessionContext(session_id="s2", role="reviewer")
    try:
        first = await conn.call_tool("context", {}, CallOptions(session=one))  # opens the connection
        second = await conn.call_tool("context", {}, CallOptions(session=two))
        assert conn.status().protocol_version == "2025-11-25"
    finally:
        await conn.close()
    assert json.loads(first.content[0].text) == {"meta": one.to_json(), "capability": one.to_json()}
    assert json.loads(second.content[0].text) == {"meta": two.to_json(), "capability": one.to_json()}


@pytest.mark.anyio
async def test_concurrent_starts_share_one_attempt() -> None:
    built: list[MCPServer] = []

    def factory() -> MCPServer:
        built.append(make_server(Probe()))
        return built[-1]

    conn = make_connection(builtin_config(), factory)
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(conn.start)
        await conn.start()
        assert conn.status().state is ConnState.READY
    finally:
        await conn.close()
    assert len(built) == 1
    assert conn.status().state is ConnState.CLOSED


@pytest.mark.anyio
async def test_a_builtin_without_an_implementation_fails_to_start_with_a_clear_error_every_time() -> None:
    conn = make_connection(builtin_config("ghost"), None, clock=FakeClock())
    errors = []
    for _ in range(2):  # the second start falls in the backoff: the same error, not a promise to retry
        with pytest.raises(ToolshellError) as caught:
            await conn.start()
        errors.append(caught.value.to_json()["error"])
    await conn.close()
    message = 'no built-in server is named \'ghost\'; use type = "stdio" or "http" for an external one'
    assert errors == [{"code": "unavailable", "message": message, "retryable": False}] * 2


@pytest.mark.anyio
async def test_a_closed_connection_refuses_calls() -> None:
    conn = connect(Probe(), "auto")
    await conn.start()
    await conn.close()
    with pytest.raises(ToolshellError, match="server 'b' is closed"):
        await conn.call_tool("context", {}, CallOptions())


def _group(*excs: Exception) -> ExceptionGroup:
    return ExceptionGroup("outer", [ExceptionGroup("inner", list(excs))])


_CLOSED = MCPError(types.CONNECTION_CLOSED, "Connection closed")
_ENDED = Situation("x", "calling 'echo'", stream_ended=True)


@pytest.mark.parametrize(
    ("exc", "where", "expected"),
    [
        (
            _group(RuntimeError("noise"), _CLOSED),
            _ENDED,
            ("unavailable", "server 'x' closed the connection while calling 'echo'", True),
        ),
        (  # the same code from a server whose stream goes on is that server's own error
            _CLOSED,
            None,
            ("tool_error", "server 'x' failed while calling 'echo': Connection closed (code -32000)", False),
        ),
        (
            MCPError(types.CONNECTION_CLOSED, "SSE stream ended without a response"),
            None,
            (
                "unavailable",
                "the answer stream from server 'x' broke while calling 'echo': SSE stream ended without a response",
                True,
            ),
        ),
        (
            MCPError(types.INVALID_PARAMS, "Unknown tool: nope"),
            None,
            ("invalid_input", "server 'x' rejected the input while calling 'echo': Unknown tool: nope", False),
        ),
        (
            _group(MCPError(types.INTERNAL_ERROR, "Server returned an error response")),
            Situation("x", "calling 'echo'", http_status=401),
            (
                "connection_required",
                "server 'x' refused us (HTTP 401) while calling 'echo'; it needs authorization: "
                'set headers = { Authorization = "Bearer …" } for it in the config',
                False,
            ),
        ),
        (
            MCPError(types.INTERNAL_ERROR, "boom"),
            None,
            ("tool_error", "server 'x' failed while calling 'echo': boom (code -32603)", False),
        ),
        (TimeoutError(), None, ("unavailable", "server 'x' timed out while calling 'echo'", True)),
    ],
)
def test_foreign_errors_are_translated_most_specific_first(
    exc: BaseException, where: Situation | None, expected: tuple[str, str, bool]
) -> None:
    err = translate(exc, where or Situation("x", "calling 'echo'"))
    assert (str(err.code), err.message, err.retryable) == expected
    assert err.code in ErrorCode
