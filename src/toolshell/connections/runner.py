"""The task that holds one open `mcp.client.Client` for as long as the connection lives.

A connection outlives whichever task opened it (a session's call opens a lazy server; another
session closes the host), while the SDK's client must be entered and exited in one task. So each
open connection has its own task: it enters the client, keeps the stderr reader and the
`tools/list_changed` listener beside it, waits to be told to stop, then exits the client and
cleans up. It is started without the caller's `CURRENT_CALL`, so SDK tasks spawned under it
never mistake an old call for the one asking a question.

The runner also watches the stream of messages from the server: its end is the one sure sign
that the connection is gone (an error's code is not: see `translate.is_connection_lost`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
from mcp.client import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolshell.connections.elicitation import CURRENT_CALL
from toolshell.connections.targets import Attempt
from toolshell.errors import ToolshellError

logger = logging.getLogger(__name__)

STOP_GRACE = 10.0
"""Longest wait for a runner to finish its teardown (the SDK's stdio shutdown is bounded by ~6 s)."""

_alive: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones


def spawn(fn: Callable[[], Awaitable[None]]) -> None:
    """Start `fn` as a task of its own on the running asyncio loop (toolshell runs anyio on asyncio),
    without the caller's `CURRENT_CALL`."""
    ctx = contextvars.copy_context()
    ctx.run(CURRENT_CALL.set, None)
    task: asyncio.Task[None] = asyncio.get_running_loop().create_task(fn(), context=ctx)  # type: ignore[arg-type]
    _alive.add(task)
    task.add_done_callback(_alive.discard)


class _EndWatch:
    """The read stream a transport hands the client, marking `ended` when it ends.

    It keeps the SDK's `ReadStream` protocol, including `last_context` (the sender's context
    that the Streamable HTTP transport attaches to each message)."""

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> contextvars.Context | None:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EndWatch:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], ended: anyio.Event) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _EndWatch(read_stream, ended), write_stream


class Runner:
    """One attempt at an open connection, from spawn to teardown."""

    def __init__(
        self,
        attempt: Attempt,
        make_client: Callable[[object], Client],
        startup_timeout: float,
        on_tools_changed: Callable[[], None],
        on_gone: Callable[[Runner], None],
    ) -> None:
        self._attempt = attempt
        self._make_client = make_client
        self._startup_timeout = startup_timeout
        self._on_tools_changed = on_tools_changed
        self._on_gone = on_gone
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.failure: ToolshellError | None = None
        """The connection's report of `error`, shared by every caller that waited on this attempt."""
        self.ready = anyio.Event()
        """Set when the client is open or the attempt failed (then `error` says why)."""
        self.stream_ended = anyio.Event()
        """Set when the stream of messages from the server ended: the connection is gone. (An
        in-process server has no stream; its connection ends only with the runner, `done`.)"""
        self.done = anyio.Event()
        self._stop = anyio.Event()
        self._scope = anyio.CancelScope()

    def start(self) -> None:
        spawn(self._main)

    def stop_soon(self) -> None:
        """Ask the task to exit the client: gracefully once connected, by cancellation before."""
        self._stop.set()
        if not self.ready.is_set():
            self._scope.cancel()

    async def stop(self) -> None:
        """`stop_soon()`, then wait (bounded, shielded) until the task has cleaned up."""
        self.stop_soon()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE):
            await self.done.wait()

    async def _main(self) -> None:
        with self._scope:
            await self._run()

    async def _run(self) -> None:
        try:
            arg = self._attempt.client_arg()
            if isinstance(arg, AbstractAsyncContextManager):  # a transport, not an in-process server
                arg = _watched(arg, self.stream_ended)
            client = self._make_client(arg)
            async with anyio.create_task_group() as tg:
                # Read stderr from the spawn on: a chatty server must not block on a full pipe.
                tg.start_soon(self._attempt.background)
                # The startup deadline must be a scope around the client's whole life (the client
                # opens task groups that outlive `__aenter__`); it is lifted once connected.
                with anyio.CancelScope() as startup:
                    tg.start_soon(self._startup_deadline, startup)
                    async with client:
                        self._attempt.opened()
                        self.client = client
                        self.ready.set()
                        async with anyio.create_task_group() as beside:
                            beside.start_soon(self._watch)
                            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                                beside.start_soon(self._listen, client)
                            await self._stop.wait()
                            self.client = None
                            beside.cancel_scope.cancel()
                tg.cancel_scope.cancel()
            if not self.ready.is_set():
                raise TimeoutError(f"no answer within {self._startup_timeout:g}s")
        except Exception as e:  # noqa: BLE001 - reported to whoever waits on `ready`
            if not self.ready.is_set():
                self.error = e
            else:
                logger.debug("connection teardown raised", exc_info=True)
        finally:
            self.client = None
            with anyio.CancelScope(shield=True):
                await self._attempt.cleanup()
            self.ready.set()
            self.done.set()

    async def _startup_deadline(self, startup: anyio.CancelScope) -> None:
        await anyio.sleep(self._startup_timeout)
        if not self.ready.is_set():
            self._attempt.abort()  # a hung server would otherwise hold the SDK's polite shutdown
            startup.cancel()

    async def _watch(self) -> None:
        await self._attempt.watch()
        self._on_gone(self)
        self._stop.set()

    async def _listen(self, client: Client) -> None:
        """On 2026-07-28 connections `tools/list_changed` arrives only through `subscriptions/listen`."""
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _ in sub:
                    self._on_tools_changed()
        except Exception as e:  # noqa: BLE001 - change events are best effort; the list is still served
            logger.debug("no tools/list_changed stream: %r", e)
