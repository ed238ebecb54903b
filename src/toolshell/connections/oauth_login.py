"""The person's side of an OAuth login: a browser (or a printed URL) and a loopback redirect.

The authorization server sends the browser back to `http://127.0.0.1:<port>/callback`; a one-shot
listener on that port (bound before the authorization URL exists, so the URL can name the port)
takes the code and state and answers with a short page. Who opens the URL is pluggable: the
system browser by default (`webbrowser`, which honours `$BROWSER`), a plain HTTP GET in tests.
"""

from __future__ import annotations

import socket
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread
import uvicorn
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

CALLBACK_PATH = "/callback"

Opener = Callable[[str], Awaitable[bool]]
"""Opens an authorization URL for the person; returns whether anything was opened."""


async def open_in_browser(url: str) -> bool:
    """The system browser (`webbrowser` waits for a `$BROWSER` command, so off the event loop)."""
    return bool(await anyio.to_thread.run_sync(webbrowser.open, url))


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class LoginUI:
    """How a login reaches a person. Without one, a connection never starts a login itself."""

    open_url: Opener = open_in_browser
    notify: Callable[[str], None] = field(default=_to_stderr)
    """Told the URL before it is opened, so a person without a browser can copy it."""
    timeout_seconds: float = 300.0


class LoopbackCallback:
    """A listener on 127.0.0.1 for one authorization redirect."""

    def __init__(self, port: int = 0) -> None:
        self._sock = socket.socket()
        try:
            self._sock.bind(("127.0.0.1", port))
        except OSError:
            if port == 0:
                raise
            self._sock.close()
            self._sock = socket.socket()
            self._sock.bind(("127.0.0.1", 0))  # the remembered port is taken: a fresh one, a fresh registration
        self._sock.listen()
        self.port = int(self._sock.getsockname()[1])
        self._result: AuthorizationCodeResult | None = None
        self._error: str | None = None
        self._arrived = anyio.Event()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def receive(self, url: str, ui: LoginUI, server: str) -> AuthorizationCodeResult:
        """Serve, show the person `url`, and wait (bounded) for the redirect that comes back."""
        app = Starlette(routes=[Route(CALLBACK_PATH, self._callback)])
        web = uvicorn.Server(uvicorn.Config(app, http="h11", log_level="error", lifespan="off"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(web.serve, [self._sock])
            ui.notify(f"To log in to server {server!r}, open this URL in a browser:\n  {url}")
            tg.start_soon(_open, ui, url)
            try:
                with anyio.fail_after(ui.timeout_seconds):
                    await self._arrived.wait()
            except TimeoutError:
                raise OAuthFlowError(
                    f"no answer from the browser within {ui.timeout_seconds:g}s; run the login again"
                ) from None
            finally:
                web.should_exit = True
        if self._result is None:
            raise OAuthFlowError(f"the authorization server refused the login: {self._error}")
        return self._result

    def close(self) -> None:
        self._sock.close()

    async def _callback(self, request: Request) -> Response:
        if self._arrived.is_set():
            return PlainTextResponse("this login is already complete", status_code=409)
        query = request.query_params
        code, error = query.get("code"), query.get("error")
        if not code and not error:
            return PlainTextResponse("expected ?code=…&state=… from the authorization server", status_code=400)
        if code:
            self._result = AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
            page = "<p>Logged in. You can close this tab and return to toolshell.</p>"
        else:
            described = query.get("error_description")
            self._error = _printable(f"{error}: {described}" if described else str(error))
            page = "<p>The login was refused. Return to toolshell for details.</p>"
        self._arrived.set()
        return HTMLResponse(f"<!doctype html><title>toolshell login</title>{page}")


async def _open(ui: LoginUI, url: str) -> None:
    await ui.open_url(url)


def _printable(text: str, limit: int = 200) -> str:
    """What a remote server wrote, fit for a terminal: printable ASCII only, bounded."""
    cleaned = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
