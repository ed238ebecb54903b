"""`toolshell setup HOST`: adding toolshell to an agent host's own MCP config file.

Modules: `formats` (each host's files, scopes and entry shape), `launch` (the command line a host
runs), `files` (reading and rewriting a host file without disturbing the rest), `move` (`--move`:
the host's other servers into `toolshell.toml`).
"""

from __future__ import annotations

from toolshell.frontends.hosts.formats import HOSTS, HostFormat

__all__ = ["HOSTS", "HostFormat"]
