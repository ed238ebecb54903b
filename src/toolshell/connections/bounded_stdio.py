"""The stdio transport with a bound on each message and no trust in what the server writes.

The SDK's `stdio_client` reads stdout as text and keeps joining a growing line with each chunk,
so one 300 MB answer costs minutes and gigabytes, a stray `\\xff` ends the connection, and every
non-JSON line is logged with a traceback. This transport keeps the SDK's process lifecycle (its
spawn and its spec-ordered shutdown: close stdin, wait, kill the tree) and replaces only the two
pipe tasks:

- stdout is split into lines as bytes, in linear time. A line longer than `max_message_bytes` is
  never held: its first and last bytes are kept to find its JSON-RPC `id`, the rest is dropped,
  and the call it answers fails with an error naming the bound. The connection goes on.
- the answer to a `tools/list` request is cut to `max_tools` entries before any model is built
  (`list_cut`).
- a line that is not UTF-8, not JSON-RPC, or a response to an id that was never asked is skipped
  and counted in `Noise`, which `toolshell servers` shows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from mcp.client import stdio as sdk_stdio
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage

from toolshell.connections.list_cut import cut_listing

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
_EDGE = 512
"""Bytes kept from each end of an oversized line: enough to hold its `"id"` member."""
_ID = rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_BYTES = re2.Options()
_BYTES.encoding = re2.Options.Encoding.LATIN1  # any byte is one character, UTF-8 or not
# RE2 (linear time, no backtracking): these run on what the server wrote.
_HEAD_ID = re2.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?' + _ID, options=_BYTES)
_TAIL_ID = re2.compile(_ID + rb"\s*\}\s*\z", options=_BYTES)

RequestId = int | str
Streams = tuple[
    "anyio.abc.ObjectReceiveStream[SessionMessage | Exception]", "anyio.abc.ObjectSendStream[SessionMessage]"
]


@dataclass
class Noise:
    """What a server wrote on stdout that was not a message for us; kept across restarts."""

    undecodable: int = 0
    not_json: int = 0
    unknown_id: int = 0
    oversized: int = 0

    def notes(self) -> list[str]:
        kinds = [
            (self.undecodable, "not UTF-8"),
            (self.not_json, "not JSON-RPC"),
            (self.unknown_id, "answers to requests never sent"),
            (self.oversized, "over max_message_bytes"),
        ]
        found = [f"{n} {what}" for n, what in kinds if n]
        return [f"skipped stdout lines: {', '.join(found)}"] if found else []


@dataclass(frozen=True)
class _Oversized:
    """An over-long line: its size so far, its first and last bytes; `done` once its newline came."""

    size: int
    head: bytes
    tail: bytes
    done: bool


@dataclass
class LineSplitter:
    """Newline-delimited frames from byte chunks. A frame over `limit` is reported twice as
    `_Oversized`: when it crosses the limit (so its call can fail at once) and when it ends."""

    limit: int
    _buf: bytearray = field(default_factory=bytearray)
    _size: int | None = None  # the length of the current line once it is over the limit
    _head: bytes = b""
    _tail: bytes = b""

    def feed(self, chunk: bytes) -> Iterator[bytes | _Oversized]:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if (crossed := self._take(piece)) is not None:
                yield crossed
            if end < 0:
                return
            yield self._finish()
            start = end + 1

    def _take(self, piece: bytes) -> _Oversized | None:
        """Add to the current line; returns an `_Oversized` the moment the line crosses the limit."""
        if self._size is not None:
            self._size += len(piece)
            self._tail = (self._tail + piece)[-_EDGE:]
            return None
        if len(self._buf) + len(piece) <= self.limit:
            self._buf += piece
            return None
        self._size = len(self._buf) + len(piece)
        self._head = (bytes(self._buf[:_EDGE]) + piece[:_EDGE])[:_EDGE]
        self._tail = (bytes(self._buf[-_EDGE:]) + piece)[-_EDGE:]
        self._buf = bytearray()  # let the memory go now, not at the end of the line
        return _Oversized(self._size, self._head, self._tail, done=False)

    def _finish(self) -> bytes | _Oversized:
        if self._size is not None:
            big = _Oversized(self._size, self._head, self._tail, done=True)
            self._size, self._head, self._tail = None, b"", b""
            return big
        line, self._buf = bytes(self._buf), bytearray()
        return line


def _parse_id(raw: bytes) -> RequestId:
    text = raw.decode("utf-8", "replace")
    return int(text) if not text.startswith('"') else text[1:-1]


def oversized_id(big: _Oversized) -> RequestId | None:
    """The `id` of an over-long JSON-RPC message, found where serializers put it: first or last."""
    m = _HEAD_ID.match(big.head)
    if m is None and big.done:
        m = _TAIL_ID.search(big.tail)
    return _parse_id(m.group(1)) if m else None


class _Reader:
    """Turns stdout frames into session messages; skips and counts everything else."""

    def __init__(self, noise: Noise, limit: int, max_tools: int) -> None:
        self.noise = noise
        self.limit = limit
        self.max_tools = max_tools
        self.pending: set[RequestId] = set()
        self.listing: set[RequestId] = set()
        """The pending `tools/list` requests: their answers are cut to `max_tools`."""
        self._answered = False  # the oversized line being read has already failed its call

    def message(self, frame: bytes | _Oversized) -> SessionMessage | Exception | None:
        if isinstance(frame, _Oversized):
            return self._oversized(frame)
        if not frame.strip():
            return None
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError:
            self.noise.undecodable += 1
            return None
        try:
            message = self._decode(text)
        except ValueError as e:
            self.noise.not_json += 1
            return e  # as the SDK does: the connection names the first such line if the handshake fails
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id not in self.pending:
                self.noise.unknown_id += 1
                return None
            self.pending.discard(message.id)
            self.listing.discard(message.id)
        return SessionMessage(message)

    def _decode(self, text: str) -> types.JSONRPCMessage:
        cut = cut_listing(text, self.max_tools) if self.listing else None
        rid = None if cut is None else cut.get("id")
        if isinstance(rid, int | str) and rid in self.listing:
            return types.jsonrpc_message_adapter.validate_python(cut, by_name=False)
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False)

    def _oversized(self, big: _Oversized) -> SessionMessage | None:
        answered, self._answered = self._answered, not big.done and self._answered
        if answered:
            return None
        rid = oversized_id(big)
        if rid is None or rid not in self.pending:
            if big.done:
                self.noise.oversized += 1
            return None
        self._answered = not big.done
        self.pending.discard(rid)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=rid, error=self._too_big(big)))

    def _too_big(self, big: _Oversized) -> types.ErrorData:
        size = f"{big.size:,} bytes" if big.done else f"more than {self.limit:,} bytes"
        return types.ErrorData(
            code=types.INTERNAL_ERROR,
            message=f"its answer was {size}, over max_message_bytes = {self.limit:,}; ask for less "
            "(a smaller page, a filter) or raise max_message_bytes for this server",
        )

    def sent(self, message: SessionMessage) -> None:
        if isinstance(message.message, types.JSONRPCRequest):
            self.pending.add(message.message.id)
            if message.message.method == "tools/list":
                self.listing.add(message.message.id)


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters, errlog: TextIO, *, max_message_bytes: int, noise: Noise, max_tools: int
) -> AsyncIterator[Streams]:
    """Like the SDK's `stdio_client` (same spawn, same shutdown), with bounded, tolerant reading."""
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # No awaits until the task group is entered, or a cancellation here would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    reader = _Reader(noise, max_message_bytes, max_tools)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(max_message_bytes)
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:
                        for frame in splitter.feed(chunk):
                            if (message := reader.message(frame)) is not None:
                                await read_writer.send(message)
                finally:
                    await sdk_stdio._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # our shutdown closed the streams, or the session went away: both end the reading

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    reader.sent(message)
                    json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((json + "\n").encode(server.encoding, server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end instead of hanging
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
