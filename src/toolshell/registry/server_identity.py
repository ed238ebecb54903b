"""Which program a server's name stands for: grants and ratings belong to it, not to the name.

Two configs may both name a server `evil` and mean different programs. What a person approved is
the program: a stdio server's command, arguments and working directory, an HTTP server's URL, a
built-in server's module. `server_identity` gives a hash of that (stored with grants and ratings;
an expanded `${SECRET}` in an argument or URL never reaches the store in clear) and a label for
people (the command or URL, with the config's secrets masked).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass

from toolshell.config import Config, ServerConfig
from toolshell.redact import Redactor
from toolshell.registry.filters import configured_servers


@dataclass(frozen=True)
class ServerIdentity:
    """A server as the program it runs."""

    id: str
    """`sha256:<hex>` of the program's description; equal ids, same program."""
    label: str
    """The command line (`python evil.py --fast`, `… (in /srv)`), URL or built-in module, secrets masked."""


def server_identity(server: ServerConfig, redact: Redactor) -> ServerIdentity:
    """The identity of a configured server.

    Args:
        server: its `[[mcp.servers]]` entry, `${VAR}`s expanded.
        redact: masks the config's secrets in the label.
    """
    if server.type == "stdio":
        described: dict[str, object] = {"command": server.command, "args": server.args, "cwd": server.cwd}
        words = [redact(w) for w in [server.command or "", *server.args]]  # masked before quoting
        label = shlex.join(words) + (f" (in {redact(server.cwd)})" if server.cwd else "")
    elif server.type == "http":
        described, label = {"url": server.url}, redact(server.url or "")
    else:
        described = {"name": server.name, "module": server.module}
        label = f"built-in {server.module or server.name}"
    text = json.dumps({"type": server.type, **described}, sort_keys=True, separators=(",", ":"))
    return ServerIdentity("sha256:" + hashlib.sha256(text.encode()).hexdigest(), label)


def configured_identities(config: Config) -> dict[str, ServerIdentity]:
    """The program each server of the config runs, by server name (to tell which grants apply)."""
    redact = Redactor(config.secrets)
    return {server.name: server_identity(server, redact) for server in configured_servers(config)}
