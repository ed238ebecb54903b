"""Login, logout and status of the OAuth servers: what `toolshell auth` does, as a Python API.

A login is a connection that may ask a person: it drops the stored tokens (keeping the
registration), connects and lists the tools; the server's 401 starts the SDK's flow, which opens
the browser and stores what it gets. Status reads the records and never shows a token; a record
the key ring cannot open shows as not logged in, saying why.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from toolshell.config.models import ServerConfig
from toolshell.connections.base import SessionContext
from toolshell.connections.factory import make_connection
from toolshell.connections.oauth import AuthSetup, oauth_settings, token_file
from toolshell.connections.oauth_store import UnopenableRecord
from toolshell.connections.oauth_tokens import TokenRecord
from toolshell.errors import ErrorCode, ToolshellError


def _oauth_server(servers: list[ServerConfig], name: str) -> ServerConfig:
    for server in servers:
        if server.name == name:
            if oauth_settings(server) is None:
                raise ToolshellError(
                    ErrorCode.INVALID_INPUT,
                    f'server {name!r} does not log in with OAuth (only type = "http" servers do, unless their '
                    "headers carry an Authorization or oauth.enabled = false)",
                )
            return server
    known = ", ".join(s.name for s in servers if oauth_settings(s) is not None) or "none"
    raise ToolshellError(ErrorCode.INVALID_INPUT, f"no server is named {name!r} (OAuth servers: {known})")


async def login(servers: list[ServerConfig], name: str, setup: AuthSetup) -> TokenRecord:
    """Log in to server `name` (a fresh authorization); returns what was stored.

    Raises:
        ToolshellError: not an OAuth server, or the login failed (`connection_required`, with why).
    """
    server = _oauth_server(servers, name)
    file = token_file(server, setup)
    file.check()
    file.forget_tokens()
    conn = make_connection(server, auth=dataclasses.replace(setup, logging_in=True))
    try:
        await conn.list_tools(SessionContext())
    finally:
        await conn.close()
    return file.read()


def logout(servers: list[ServerConfig], name: str, setup: AuthSetup) -> bool:
    """Forget server `name`'s tokens and registration. Returns whether anything was stored."""
    return token_file(_oauth_server(servers, name), setup).forget()


def status(servers: list[ServerConfig], setup: AuthSetup, name: str | None = None) -> list[dict[str, Any]]:
    """One row per OAuth server (or just `name`): logged in or not, issuer, scope, expiry. No secrets."""
    chosen = [_oauth_server(servers, name)] if name else [s for s in servers if oauth_settings(s) is not None]
    return [_row(s, setup) for s in chosen]


def _row(server: ServerConfig, setup: AuthSetup) -> dict[str, Any]:
    problem = None
    try:
        record = token_file(server, setup).read()
    except UnopenableRecord as e:
        record, problem = TokenRecord(server_url=server.url or ""), e.message
    settings = oauth_settings(server)
    tokens = record.tokens
    expires = record.expires_at
    return {
        "server": server.name,
        "grant": settings.grant if settings else None,
        "logged_in": tokens is not None,
        "issuer": record.issuer,
        "scope": tokens.scope if tokens else None,
        "expires_in_seconds": None if expires is None or tokens is None else max(0, int(expires - time.time())),
        "refreshable": bool(tokens and tokens.refresh_token),
        "client_id": record.client_info.client_id if record.client_info else (settings.client_id if settings else None),
        "client_source": record.client_source or ("configured" if settings and settings.client_id else None),
        "problem": problem,
    }


def render_status(rows: list[dict[str, Any]]) -> str:
    """Plain text for `toolshell auth status`."""
    if not rows:
        return "no server logs in with OAuth"
    lines = []
    for r in rows:
        if r["problem"]:
            state = f"not logged in: {r['problem']}"
        elif not r["logged_in"]:
            state = f"not logged in (toolshell auth login {r['server']})"
        else:
            left = r["expires_in_seconds"]
            expiry = "no expiry given" if left is None else ("expired" if left == 0 else f"expires in {left}s")
            state = f"logged in; {expiry}" + ("; refreshable" if r["refreshable"] else "")
        lines.append(f"{r['server']:<16} {state}")
        lines.extend(f"    {key}: {r[key]}" for key in ("issuer", "scope", "client_id") if r[key])
    return "\n".join(lines)
