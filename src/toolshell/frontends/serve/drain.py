"""SIGTERM drains a `serve --http` worker, so a rolling restart loses no call.

On SIGTERM, at once: `/readyz` answers `503` (`frontends.serve.health`), and a new request to
`/mcp` gets `503` with `Retry-After: 1` and a retryable error (nothing of it ran), which a proxy
retries on another worker (the configurations in docs/scale-out.md do). Requests in flight go on,
and so do parked runs (2026-07-28 `bash` calls waiting for an answer): their rounds are in the
store, so a retry that lands on another worker is relayed here (`frontends.serve.relay`). When
none is left, or after `[serve] drain_seconds`, the listener closes and the process exits; runs
still parked then are marked stopped in the store, so their retries get a `stopped` error at once
and the approvals they waited for stay pending. A second SIGTERM, or Ctrl-C, stops without
waiting. The exit status is 0 (the signal is not raised again).
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
from starlette.types import ASGIApp, Receive, Scope, Send

from toolshell.errors import ErrorCode, ToolshellError, error_body

CLOSE_SECONDS = 2
"""After the drain, how long open streams (a legacy client's `GET`) get before they are cut."""
_BUSY = "this worker is shutting down and took none of this request; send it again (another worker answers)"


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
        """Requests to `/mcp` being answered (not counting `GET` streams, which never end by themselves)."""
        self.parked: Callable[[], int] = lambda: 0
        """How many parked runs are still running (set once the serving lifespan starts)."""

    def begin(self) -> None:
        if not self.draining:
            self.draining, self.began = True, time.monotonic()

    def over(self) -> bool:
        """Nothing left in flight, or the drain's time is up."""
        idle = self.in_flight == 0 and self.parked() == 0
        return self.draining and (idle or time.monotonic() - self.began >= self.seconds)

    def guard(self, app: ASGIApp) -> ASGIApp:
        """`app` (the `/mcp` endpoint), counting requests in flight and refusing new ones once draining."""
        return _Guarded(app, self)

    def watching(
        self, lifespan: Callable[[Any], AbstractAsyncContextManager[Any]], live: Callable[[Any], int]
    ) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
        """The serving `lifespan`, telling this drain how many parked runs its state holds (`live`)."""

        @asynccontextmanager
        async def watched(server: Any) -> AsyncIterator[Any]:
            async with lifespan(server) as state:
                self.parked = lambda: live(state)
                yield state

        return watched


class _Guarded:
    """An ASGI app (a class, so Starlette routes every method to it, not only GET)."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            await _refuse(send)
            return
        counted = scope.get("method") != "GET"
        self.drain.in_flight += counted
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= counted


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
        if self.on_started is not None and not self.should_exit:  # uvicorn sets it when the start failed
            self.on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM:
            super().handle_exit(sig, frame)
        elif self.drain.draining:
            self.should_exit = True  # a second SIGTERM: stop now
        else:
            self.drain.begin()

    async def on_tick(self, counter: int) -> bool:
        if not self.should_exit and self.drain.over():
            self.should_exit = True
        return await super().on_tick(counter)
