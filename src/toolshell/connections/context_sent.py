"""What of the session context a server is sent: the host's working directory stays on this machine.

The session context (seed 001) names the directory the host runs in: a path that tells a server
whose machine it is on, which user, which project. A local server (a built-in one, a stdio
process, an HTTP server at a loopback address) runs on this machine and may know it; a server
elsewhere gets `workdir` empty unless its config says `send_workdir = true`. A URL's host is
judged as written: only `localhost`, 127.0.0.0/8 and ::1 are loopback (a name that happens to
resolve to this machine counts as elsewhere, which sends less, never more).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlsplit

from toolshell.config import ServerConfig
from toolshell.connections.base import SessionContext
from toolshell.loopback import is_loopback_host


def is_local(server: ServerConfig) -> bool:
    """A built-in or stdio server, or an HTTP server at a loopback address."""
    if server.type != "http":
        return True
    try:
        host = urlsplit(server.url or "").hostname or ""
    except ValueError:
        return False
    return is_loopback_host(host)


def sends_workdir(server: ServerConfig) -> bool:
    """`send_workdir` when the config sets it, else whether the server is local."""
    return server.send_workdir if server.send_workdir is not None else is_local(server)


def context_for(server: ServerConfig, session: SessionContext) -> dict[str, Any]:
    """The session context as `server` receives it (`workdir` empty for a server elsewhere)."""
    shown = session if sends_workdir(server) else dataclasses.replace(session, workdir="")
    return shown.to_json()


__all__ = ["context_for", "is_local", "sends_workdir"]
