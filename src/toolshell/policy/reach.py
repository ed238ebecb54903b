"""Which servers a script can reach, read from its text: so `run`, `plan` and saved-script runs
start only those (none for `echo hi`) instead of every startup server.

Only a script whose every `tools` call is written out (its scan is `complete`, and each call's
first word is literal) is read this way. A call that needs the whole catalog (`tools --help`,
`tools search`, `tools plan`, `tools scripts`) or a name that is built at run time gives None:
start what the config says, as before.
"""

from __future__ import annotations

from toolshell.config import Config
from toolshell.policy.plan import scan
from toolshell.registry.filters import configured_servers
from toolshell.registry.naming import fold, parse_flat_name

_WHOLE_CATALOG = {"search", "plan", "scripts"}


def servers_a_script_names(script: str, config: Config) -> set[str] | None:
    """The configured servers the script's `tools` calls name (a top-level tool names none), or
    None when it cannot be read that way."""
    found = scan(script)
    if not found.complete:
        return None
    servers = {fold(s.name): s.name for s in configured_servers(config) if s.enabled}
    named: set[str] = set()
    for call in found.calls:
        first = call.argv[0] if call.argv else None
        if first is None or first.startswith("-") or fold(first) in _WHOLE_CATALOG:
            return None
        server, _ = parse_flat_name(fold(first))
        name = servers.get(fold(first)) or (servers.get(server) if server else None)
        if name is not None:
            named.add(name)
    return named
