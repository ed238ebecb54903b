"""stdio servers as subprocesses: crashes, hangs, noise on stdout, stderr capture, no orphans."""

from __future__ import annotations

import json
import uuid

import anyio
import pytest

from _connections_support import FakeClock, alive, processes_with_env, stdio_config, wait_until
from toolshell.connections.base import CallOptions, ConnState, SessionContext
from toolshell.connections.factory import make_connection
from toolshell.connections.stdio import StderrTail
from toolshell.errors import ToolshellError

ANY = CallOptions()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def mark() -> dict[str, str]:
    """An environment marker: every process a test's servers start carries it."""
    return {"TOOLSHELL_TEST_MARK": uuid.uuid4().hex}


def marked(env: dict[str, str]) -> list[int]:
    ((key, value),) = env.items()
    return processes_with_env(f"{key}={value}")


async def echo(conn, text: str = "hi") -> str:  # type: ignore[no-untyped-def]
    result = await conn.call_tool("echo", {"text": text}, ANY)
    return result.content[0].text


@pytest.mark.anyio
async def test_a_crashed_server_fails_its_call_then_restarts_on_a_later_call_with_backoff(mark) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    conn = make_connection(stdio_config("crashy", env=mark), clock=clock)
    try:
        assert [t.name for t in await conn.list_tools(SessionContext())] == ["echo", "crash", "hang", "pids"]
        with pytest.raises(ToolshellError) as crashed:
            await conn.call_tool("crash", {}, ANY)
        assert crashed.value.to_json()["error"] == {
            "code": "unavailable",
            "message": "server 'crashy' closed the connection while calling 'crash'; "
            "its last words on stderr: 'fatal: the crash tool was called'",
            "retryable": True,
        }
        await wait_until(lambda: conn.status().state is ConnState.FAILED)

        with pytest.raises(ToolshellError) as waiting:
            await echo(conn)
        assert waiting.value.to_json()["error"] == {
            "code": "unavailable",
            "message": "server 'crashy' stopped; its last words on stderr: 'fatal: the crash tool was called'; "
            "a call after 1s will start it again",
            "retryable": True,
        }

        clock.advance(1.0)
        assert [t.name for t in await conn.list_tools(SessionContext())] == ["echo", "crash", "hang", "pids"]
        assert await echo(conn, "back") == "back"
        assert [t.name for t in await conn.list_tools(SessionContext())] == ["echo", "crash", "hang", "pids"]
        status = conn.status()
        assert (status.state, status.restarts, status.last_error) == (ConnState.READY, 1, None)
        # The cache lived until the restart: one listing per process.
        assert status.stderr_tail.count("listing tools") == 2
    finally:
        await conn.close()
    assert marked(mark) == []


@pytest.mark.anyio
async def test_the_backoff_doubles_while_the_server_keeps_failing(mark) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    conn = make_connection(stdio_config("crashy", env=mark), clock=clock)
    try:
        for _ in range(2):
            with pytest.raises(ToolshellError):
                await conn.call_tool("crash", {}, ANY)
            await wait_until(lambda: conn.status().state is ConnState.FAILED)
            clock.advance(1.0)
        with pytest.raises(ToolshellError, match="a call after 1s will start it again"):
            await echo(conn)
        clock.advance(1.0)
        assert await echo(conn) == "hi"
    finally:
        await conn.close()


@pytest.mark.anyio
async def test_a_server_that_hangs_at_startup_fails_after_its_startup_timeout(mark) -> None:  # type: ignore[no-untyped-def]
    conn = make_connection(stdio_config("stuck", "hang-startup", env=mark, startup_timeout_seconds=0.5))
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.start()
        status = conn.status()
    finally:
        await conn.close()
    message = (
        "server 'stuck' could not start: no answer to the MCP handshake within 0.5s; "
        "its stderr said: 'stdio-test-server starting'"
    )
    assert caught.value.to_json()["error"] == {"code": "unavailable", "message": message, "retryable": True}
    assert (status.state, status.last_error, status.stderr_tail) == (
        ConnState.FAILED,
        message,
        ["stdio-test-server starting"],
    )
    assert marked(mark) == []


@pytest.mark.anyio
async def test_a_server_that_only_prints_non_json_on_stdout_is_named_in_the_error(mark) -> None:  # type: ignore[no-untyped-def]
    conn = make_connection(stdio_config("chatty", "only-noise", env=mark, startup_timeout_seconds=0.5))
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.start()
    finally:
        await conn.close()
    assert caught.value.message == (
        "server 'chatty' could not start: no answer to the MCP handshake within 0.5s; "
        "it printed non-JSON on stdout: 'hello from a server that logs to stdout'; "
        "its stderr said: 'stdio-test-server starting'"
    )
    assert marked(mark) == []


@pytest.mark.anyio
async def test_stray_lines_on_stdout_between_messages_do_not_break_the_connection() -> None:
    conn = make_connection(stdio_config("noisy", "noise"))
    try:
        assert await echo(conn, "still here") == "still here"
    finally:
        await conn.close()


@pytest.mark.anyio
async def test_a_hung_call_times_out_the_server_is_told_and_other_calls_go_on() -> None:
    conn = make_connection(stdio_config("slow", timeout_seconds=0.3))
    try:
        with pytest.raises(ToolshellError) as caught:
            await conn.call_tool("hang", {}, ANY)
        assert caught.value.message == "server 'slow' tool 'hang' timed out after 0.3s without progress"
        await wait_until(lambda: any(line.startswith("cancelled ") for line in conn.status().stderr_tail))
        assert await echo(conn) == "hi"
        assert conn.status().state is ConnState.READY
    finally:
        await conn.close()


@pytest.mark.anyio
async def test_closing_ends_the_server_and_the_children_it_leaves_behind(mark) -> None:  # type: ignore[no-untyped-def]
    conn = make_connection(stdio_config("parent", "spawn-child", env=mark))
    await conn.start()
    pids = json.loads((await conn.call_tool("pids", {}, ANY)).content[0].text)
    assert alive(pids["pid"]) and alive(pids["child"])
    await conn.close()
    # The server exits cleanly when stdin closes; its child would live on without the group kill.
    assert not alive(pids["pid"])
    assert not alive(pids["child"])
    assert marked(mark) == []
    assert conn.status().state is ConnState.CLOSED


@pytest.mark.anyio
async def test_a_missing_command_is_a_clear_error_that_stays_not_retryable_while_backing_off() -> None:
    clock = FakeClock()
    config = stdio_config("missing").model_copy(update={"command": "/nonexistent/mcp-server"})
    conn = make_connection(config, clock=clock)
    errors = []
    try:
        for advance in (0.0, 0.0, 1.0):  # fails, is refused during the backoff, then is tried again
            clock.advance(advance)
            with pytest.raises(ToolshellError) as caught:
                await conn.start()
            errors.append(caught.value.to_json()["error"])
        status = conn.status()
    finally:
        await conn.close()
    message = errors[0]["message"]
    assert message.startswith("server 'missing' cannot be launched: ")
    assert message.endswith("; check its `command` (and `cwd`) in the config")
    # Waiting will not install the command: no retry is promised, the fix is named every time.
    assert errors == [{"code": "unavailable", "message": message, "retryable": False}] * 3
    assert (status.state, status.last_error, status.restarts) == (ConnState.FAILED, message, 1)


@pytest.mark.anyio
async def test_stderr_keeps_the_last_fifty_lines() -> None:
    tail = StderrTail()
    with tail.open() as writer:
        writer.write("".join(f"line {i}\n" for i in range(120)) + "no newline at the end")
    tail.release_write_end()
    with anyio.fail_after(5):
        await tail.pump()
    tail.close()
    assert list(tail.lines) == [f"line {i}" for i in range(71, 120)] + ["no newline at the end"]
