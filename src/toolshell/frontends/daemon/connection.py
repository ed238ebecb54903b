"""One client connection of the daemon: reading its request, running a script with its output sent
as it is written, and what it says back."""

from __future__ import annotations

import math
import socket
import threading
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.daemon import wire
from toolshell.frontends.daemon.outcome import run_output
from toolshell.host import Host


async def run_script(stream: anyio.abc.SocketStream, host: Host, request: dict[str, Any], cwd: str) -> dict[str, Any]:
    """A script in a new session, its output sent as it is written (unless `--json`); the client
    going away cancels it."""
    as_json = bool(request.get("json"))
    session = host.session(source="cli", role=role(request), workdir=cwd)
    chunks, pending = anyio.create_memory_object_stream[dict[str, str]](math.inf)

    token, loop_thread = anyio.lowlevel.current_token(), threading.get_ident()

    def write(stdout: str, stderr: str) -> None:
        chunk = {"out": stdout, "err": stderr}
        if threading.get_ident() == loop_thread:
            chunks.send_nowait(chunk)
        else:  # bashkit calls back from its own thread: hand the chunk to the loop (it wakes the sender)
            anyio.from_thread.run_sync(chunks.send_nowait, chunk, token=token)

    async def send_chunks() -> None:
        async with pending:
            async for chunk in pending:
                await send(stream, chunk)

    result = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_when_gone, stream, tg.cancel_scope)
            async with anyio.create_task_group() as sending:
                sending.start_soon(send_chunks)
                try:
                    result = await session.run(text(request, "script"), on_output=None if as_json else write)
                finally:
                    chunks.close()  # the sender sends what is left, then ends
            tg.cancel_scope.cancel()  # the watcher
    finally:
        session.close()
    if result is None:  # the client went away
        raise anyio.EndOfStream
    stdout, stderr = run_output(result, as_json)
    return {"exit": result.exit_code, "stdout": stdout, "stderr": stderr}


async def _cancel_when_gone(stream: anyio.abc.SocketStream, scope: anyio.CancelScope) -> None:
    """A client says nothing after its request: anything it sends, or its end, is a Ctrl-C."""
    try:
        await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    scope.cancel()


def reader(stream: anyio.abc.SocketStream) -> BufferedByteReceiveStream:
    """The connection's lines, read through one buffer (a client may send its next line early)."""
    return BufferedByteReceiveStream(stream)


async def read_line(stream: anyio.abc.SocketStream, lines: BufferedByteReceiveStream) -> dict[str, Any] | None:
    """One JSON line; None (and `fallback` said) when it cannot be read."""
    try:
        return wire.decode(await lines.receive_until(b"\n", wire.MAX_LINE))
    except (anyio.IncompleteRead, anyio.DelimiterNotFound, ValueError):  # too long, or not JSON: run it cold
        await send(stream, {"fallback": "a request the daemon cannot read"})
        return None


async def discard(stream: anyio.abc.SocketStream) -> None:
    """Close a refused connection cleanly: what it sent is read and dropped for a moment, since
    closing with unread data resets the connection and could lose the refusal on its way."""
    await stream.send_eof()
    with anyio.move_on_after(1.0):
        while len(await stream.receive()) > 0:
            pass


async def send(stream: anyio.abc.SocketStream, message: dict[str, Any]) -> None:
    await stream.send(wire.encode(message))


def text(request: dict[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str):
        raise ToolshellError(ErrorCode.INVALID_INPUT, f"the daemon's request has no {key}")
    return value


def role(request: dict[str, Any]) -> str | None:
    role = request.get("role")
    return role if isinstance(role, str) else None


def gone(stream: anyio.abc.SocketStream) -> bool:
    """Whether the client has closed its end (it waited too long and ran the command cold)."""
    raw = stream.extra(SocketAttribute.raw_socket)
    try:
        return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
