"""SIGTERM drains a `serve --http` worker, so a rolling restart loses no call.

On SIGTERM, at once: `/readyz` answers `503` (`frontends.serve.health`), and a new `tools/call` or
`initialize` to `/mcp` gets `503` with `Retry-After: 1` and a retryable error (nothing of it ran),
which a proxy retries on another worker (the configurations in docs/scale-out.md do). Everything
else is still answered: what work in flight needs (`tools/list`, which the SDK client sends to
check a result against the output schema; `ping`; `tasks/*`; `subscriptions/listen`; a legacy
client's answers to a call's questions and its notifications). The drain's hooks run once, in the
event loop (`Drain.on_begin`): a running call of a client that can take a yield is answered at once
with its output so far (`tasks.yielding`). Requests in flight go on, and so do parked runs
(2026-07-28 `bash` calls waiting for an answer: their rounds are in the store, so a retry that
lands on another worker is relayed here, `frontends.serve.relay`) and yielded runs. When none is
left (for `LINGER_SECONDS`), or after `[serve] drain_seconds`, the listener closes and the process
exits; runs still parked then are marked stopped in the store, so their retries get a `stopped`
error at once and the approvals they waited for stay pending, and yielded runs still running are
handed over for the next call on their shell to take over. A second SIGTERM, or Ctrl-C, stops
without waiting. The exit status is 0 (the signal is not raised again).
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import FrameType
from typing import Any

import uvicorn
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolshell.errors import ErrorCode, ToolshellError, error_body
from toolshell.frontends.serve import collector

CLOSE_SECONDS = 2
"""After the drain, how long open streams (a legacy client's `GET`) get before they are cut."""
LINGER_SECONDS = 1.0
"""Once nothing is in flight, how long a draining worker still answers: a client that just got a
result may ask for what checking it takes (the SDK's `tools/list`)."""
_BUSY = "this worker is shutting down and took none of this request; send it again (another worker answers)"
REFUSED = frozenset({"tools/call", "initialize"})
"""What a draining worker refuses: new work, and new sessions that would die with it."""
_STREAMS = frozenset({"subscriptions/listen"})
"""Requests whose answer is a stream that never ends by itself: not waited for."""


class Drain:
    """One worker's drain: whether it began, what is in flight, when it is over.

    Args:
        seconds: `[serve] drain_seconds`, the longest the drain waits for work in flight.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.draining = False
        self.began = 0.0
        self.in_flight = 0
        """Requests to `/mcp` being answered (not counting streams, which never end by themselves)."""
        self.parked: Callable[[], int] = lambda: 0
        """How many runs (parked, yielded) are still running (set once the serving lifespan starts)."""
        self.on_begin: list[Callable[[], None]] = []
        """Run once, in the event loop, when the drain begins."""
        self._announced = False
        self._idle_since: float | None = None

    def begin(self) -> None:
        if not self.draining:
            self.draining, self.began = True, time.monotonic()

    def announce(self) -> None:
        """Run the drain's hooks, once (from the event loop: the signal handler only sets a flag)."""
        if self.draining and not self._announced:
            self._announced = True
            for hook in self.on_begin:
                hook()

    def over(self) -> bool:
        """Nothing left in flight for `LINGER_SECONDS`, or the drain's time is up."""
        if not self.draining:
            return False
        now = time.monotonic()
        if self.in_flight or self.parked():
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now
        lingered = self._idle_since is not None and now - self._idle_since >= LINGER_SECONDS
        return lingered or now - self.began >= self.seconds

    def guard(self, app: ASGIApp, *, mcp: bool = False) -> ASGIApp:
        """`app`, counting requests in flight and, once draining, refusing new ones: all of them, or
        for an MCP endpoint (`mcp`) only those in `REFUSED`."""
        return _Guarded(app, self, mcp)

    def watching(
        self,
        lifespan: Callable[[Any], AbstractAsyncContextManager[Any]],
        live: Callable[[Any], int],
        on_drain: Callable[[Any], None] | None = None,
    ) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
        """The serving `lifespan`, telling this drain how many runs its state holds (`live`), and
        calling `on_drain` with that state when the drain begins."""

        @asynccontextmanager
        async def watched(server: Any) -> AsyncIterator[Any]:
            async with lifespan(server) as state:
                self.parked = lambda: live(state)
                if on_drain is not None:
                    self.on_begin.append(lambda: on_drain(state))
                yield state

        return watched


class _Guarded:
    """An ASGI app (a class, so Starlette routes every method to it, not only GET)."""

    def __init__(self, app: ASGIApp, drain: Drain, mcp: bool) -> None:
        self.app, self.drain, self.mcp = app, drain, mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            admitted = await self._admit(scope, receive)
            if admitted is None:
                await _refuse(send)
                return
            receive = admitted
        counted = scope.get("method") != "GET" and _header(scope, b"mcp-method") not in _STREAMS
        self.drain.in_flight += counted
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= counted

    async def _admit(self, scope: Scope, receive: Receive) -> Receive | None:
        """While draining: how the request is read if it is still answered, None if it is refused."""
        if not self.mcp:
            return None
        if scope.get("method") != "POST":  # a legacy client's stream or the end of its session
            return receive
        read = await _read_body(receive)
        if read is None:  # past the SDK's bound: another worker says so
            return None
        body, messages = read
        if _methods(body) & REFUSED:
            return None

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return replay


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]] | None:
    """The request's body and the messages that replay it; None past the SDK's request bound."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: the app reads that too
            return bytes(body), [{"type": "http.request", "body": bytes(body), "more_body": True}, message]
        body += message.get("body", b"")
        if len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return None
        if not message.get("more_body", False):
            return bytes(body), [{"type": "http.request", "body": bytes(body), "more_body": False}]


def _methods(body: bytes) -> set[str]:
    """The JSON-RPC methods a body holds (none when it is not JSON-RPC: the SDK answers that)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return set()
    messages = parsed if isinstance(parsed, list) else [parsed]
    return {m["method"] for m in messages if isinstance(m, dict) and isinstance(m.get("method"), str)}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _refuse(send: Send) -> None:
    body = json.dumps(error_body(ToolshellError(ErrorCode.UNAVAILABLE, _BUSY, retryable=True))).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"1"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class DrainingServer(uvicorn.Server):
    """uvicorn, with SIGTERM starting the drain instead of stopping at once."""

    def __init__(self, config: uvicorn.Config, drain: Drain, started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.drain = drain
        self.on_started = started
        """Called once the server listens (a `serve --processes` worker tells its parent)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:  # uvicorn sets it when the start failed
            return
        collector.settle()  # what startup made stays out of every later collection
        if self.on_started is not None:
            self.on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM:
            super().handle_exit(sig, frame)
        elif self.drain.draining:
            self.should_exit = True  # a second SIGTERM: stop now
        else:
            self.drain.begin()

    async def on_tick(self, counter: int) -> bool:
        self.drain.announce()
        if not self.should_exit and self.drain.over():
            self.should_exit = True
        return await super().on_tick(counter)
