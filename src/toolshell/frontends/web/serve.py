"""`toolshell web`: bind the socket first (so a port in use is one clear line), then serve the app."""

from __future__ import annotations

import secrets
import socket
import sys

import uvicorn
from starlette.routing import Mount

from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.console import say_waiting
from toolshell.frontends.web.app import web_app
from toolshell.host import Host

_WILDCARDS = ("0.0.0.0", "::", "")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port`.

    Raises:
        ToolshellError: `unavailable` naming the fix when the address is unknown or the port taken.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError, ValueError) as e:
        raise ToolshellError(
            ErrorCode.UNAVAILABLE, f"--host {host!r} is not an address this machine can bind ({e}); keep 127.0.0.1"
        ) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        reason = "is in use" if e.errno == 98 else f"cannot be bound ({e.strerror or e})"
        raise ToolshellError(
            ErrorCode.UNAVAILABLE, f"port {port} on {host} {reason}; choose another with --port"
        ) from None
    return sock


def url_for(host: str, port: int, token: str, prefix: str = "") -> str:
    """The URL to print: `http://127.0.0.1:8766/#token=…` (a wildcard bind is shown as 127.0.0.1).

    The token is in the fragment, which a browser never sends: it reaches no server log, no proxy
    and no Referer; the page's script reads it and sends it in a header."""
    shown = "127.0.0.1" if host in _WILDCARDS else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}{prefix}/#token={token}"


def ui_mount(opened: Host, host: str, port: int) -> tuple[Mount, str]:
    """The page at `/ui/` for `toolshell serve --http` to add to its routes, and its URL (fresh token)."""
    token = secrets.token_urlsafe(24)
    app = web_app(opened, token, hosts=_hosts(host))
    return Mount("/ui", app=app), url_for(host, port, token, "/ui")


def _hosts(host: str) -> list[str]:
    return ["*"] if host in _WILDCARDS else [host]


async def serve_web(config: Config, state_dir: str | None, host: str, sock: socket.socket) -> None:
    """Serve the page on a socket from `bind` until interrupted; its URL (with the token) is the
    one line on stdout. Closes the socket."""
    token = secrets.token_urlsafe(24)
    try:
        async with Host.open(config, state_dir=state_dir, on_wait=say_waiting) as opened:
            app = web_app(opened, token, hosts=_hosts(host))
            print(url_for(host, sock.getsockname()[1], token), flush=True)
            print("toolshell web: open the URL above; Ctrl-C stops it", file=sys.stderr, flush=True)
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
            await server.serve(sockets=[sock])
    finally:
        sock.close()
