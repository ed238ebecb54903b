"""`toolshell web`: bind the socket first (so a port in use is one clear line), then serve the app;
and the page under `toolshell serve --http` (`ui_mount`), with one token for the fleet."""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import uvicorn
from starlette.routing import Mount

from toolshell.config import Config
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.frontends.console import say_waiting
from toolshell.frontends.serve.auth import Gate
from toolshell.frontends.web.access import Access, host_name
from toolshell.frontends.web.app import web_app
from toolshell.host import Host, state_ring
from toolshell.store.keys import for_purpose

_WILDCARDS = ("0.0.0.0", "::", "")
WEB_TOKEN_ENV = "TOOLSHELL_WEB_TOKEN"
WEB_TOKEN_FILE = "web-token"
MIN_TOKEN_CHARS = 32


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
    return f"{_base(host, port)}{prefix}/#token={token}"


def ui_mount(opened: Host, host: str, port: int, gate: Gate) -> tuple[Mount, str]:
    """The page at `/ui/` for `toolshell serve --http` to add to its routes, and what its start line
    says about it (never the token, unless stderr is a terminal).

    One token for every worker of a store (`fleet_page`), so one URL through a balancer opens the
    page wherever a request lands; under `[serve.oauth]`, an access token of the issuer instead."""
    # Behind a proxy the page answers the public names too (`[serve] allowed_hosts`), as `/mcp` does.
    hosts = [*_hosts(host), *(host_name(name) for name in opened.config.serve.allowed_hosts)]
    if opened.config.serve.oauth is not None and gate.verifier is not None:
        how = "send an access token of the configured issuer as 'Authorization: Bearer <token>'"
        access = Access("", hosts, verifier=gate.verifier, scopes=tuple(gate.required_scopes), how=how)
        shown = f"{_base(host, port)}/ui/ (open /ui/#token=<an access token of the issuer>)"
        return Mount("/ui", app=web_app(opened, access)), shown
    tokens = fleet_tokens(opened)
    where = opened.state_dir / WEB_TOKEN_FILE
    how = f"the token is in {where} (the same on every worker of this store)"
    access = Access(tokens[0], hosts, also=tokens[1:], how=f"{how}; send 'Authorization: Bearer <token>'")
    write_private(where, tokens[0])
    shown = url_for(host, port, tokens[0], "/ui") if sys.stderr.isatty() else f"{_base(host, port)}/ui/ ({how})"
    return Mount("/ui", app=web_app(opened, access)), shown


def fleet_tokens(opened: Host, env: Mapping[str, str] = os.environ) -> list[str]:
    """The page tokens every worker of `opened`'s store accepts, the one to hand out first:
    `$TOOLSHELL_WEB_TOKEN`, else one derived from each key of the state key ring (HKDF with the
    purpose "web-page": the ring's keys are never used as they are, and knowing the page token
    tells nothing about the keys that seal shells).

    Raises:
        ToolshellError: `invalid_input` for a `$TOOLSHELL_WEB_TOKEN` too short to be a secret.
    """
    given = env.get(WEB_TOKEN_ENV, "").strip()
    if given:
        if len(given) < MIN_TOKEN_CHARS:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"${WEB_TOKEN_ENV} is {len(given)} characters; a page token that answers approvals needs at least "
                f"{MIN_TOKEN_CHARS} (make one with: python -c 'import secrets;print(secrets.token_urlsafe(32))')",
            )
        return [given]
    keys = for_purpose(state_ring(opened), "web-page")
    return [base64.urlsafe_b64encode(key).decode().rstrip("=") for key in keys]


def write_private(path: Path, value: str) -> None:
    """Write `value` to `path`, readable by this user alone (0600), replacing what was there whole
    (a link at `path` is replaced, never followed)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(value + "\n")
        os.replace(temp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise ToolshellError(ErrorCode.UNAVAILABLE, f"cannot write the page token {path}: {e.strerror or e}") from None


def _base(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in _WILDCARDS else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _hosts(host: str) -> list[str]:
    return ["*"] if host in _WILDCARDS else [host]


async def serve_web(config: Config, state_dir: str | None, host: str, sock: socket.socket) -> None:
    """Serve the page on a socket from `bind` until interrupted; its URL (with the token) is the
    one line on stdout. Closes the socket."""
    token = secrets.token_urlsafe(24)
    try:
        async with Host.open(config, state_dir=state_dir, on_wait=say_waiting) as opened:
            app = web_app(opened, Access(token, _hosts(host)))
            print(url_for(host, sock.getsockname()[1], token), flush=True)
            print("toolshell web: open the URL above; Ctrl-C stops it", file=sys.stderr, flush=True)
            server = uvicorn.Server(uvicorn.Config(app, http="h11", log_level="warning", access_log=False))
            await server.serve(sockets=[sock])
    finally:
        sock.close()
