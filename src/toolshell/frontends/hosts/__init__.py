"""`toolshell setup HOST`: adding toolshell to an agent host's own MCP config file.

Modules: `formats` (each host's files, scopes and entry shape), `launch` (the command line a host
runs), `files` (reading a host file and changing one entry without disturbing the rest), `writing`
(writing it without following a link: exclusive backups and temporary files, then a rename),
`move` (`--move`: the host's other servers into `toolshell.toml`), `gemini_trust` (whether Gemini
CLI trusts a folder).
"""

from __future__ import annotations

from toolshell.frontends.hosts.formats import HOSTS, HostFormat

__all__ = ["HOSTS", "HostFormat"]
