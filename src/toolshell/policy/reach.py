"""Which servers a script can reach, read from its text: so `run`, `plan` and saved-script runs
start only those (none for `echo hi`) instead of every startup server.

Only a script whose every `tools` call is written out (its scan is `complete`, and each call's
first word is literal) is read this way. A call that needs the whole catalog (`tools --help`,
`tools search`, `tools plan`) or a name that is built at run time gives None: start what the
config says, as before. A saved script's run counts for what its body names, read the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from toolshell.config import Config
from toolshell.policy.plan import scan
from toolshell.registry.filters import configured_servers
from toolshell.registry.naming import fold, parse_flat_name

_WHOLE_CATALOG = {"search", "plan"}
_NO_SERVER_VERBS = {"list", "save", "delete", "--help", "-h"}
"""`tools scripts` forms that read or change the saved scripts and call no tool."""
MAX_NESTING = 4
"""A saved script run from a saved script … is read this deep (the seed's 'four deep'), no deeper."""
SavedBody = Callable[[str], str | None]
"""The body of the saved script of that name, or None when there is none."""


def servers_a_script_names(
    script: str, config: Config, saved: SavedBody | None = None, *, _seen: frozenset[str] = frozenset()
) -> set[str] | None:
    """The configured servers the script's `tools` calls name (a top-level tool names none), or
    None when it cannot be read that way. With `saved`, a `tools scripts NAME …` call counts for
    the servers the saved script's own body names (read the same way)."""
    found = scan(script)
    if found.unseen or (not found.complete and saved is None):
        return None
    servers = {fold(s.name): s.name for s in configured_servers(config) if s.enabled}
    named: set[str] = set()
    for call in found.calls:
        first = call.argv[0] if call.argv else None
        if first is not None and fold(first) == "scripts":
            inner = _saved_reach(call.argv[1:], config, saved, _seen)
            if inner is None:
                return None
            named |= inner
            continue
        if first is None or first.startswith("-") or fold(first) in _WHOLE_CATALOG:
            return None
        server, _ = parse_flat_name(fold(first))
        name = servers.get(fold(first)) or (servers.get(server) if server else None)
        if name is not None:
            named.add(name)
    return named


def _saved_reach(
    args: list[str | None], config: Config, saved: SavedBody | None, seen: frozenset[str]
) -> set[str] | None:
    """What `tools scripts ARGS…` can reach: nothing for the forms that call no tool; for a run,
    what the saved script names; None when that cannot be told."""
    if not args or args[0] in _NO_SERVER_VERBS or args[1:2] in (["--help"], ["-h"]):
        return set()
    name = args[0]
    if name is None or saved is None or name in seen or len(seen) >= MAX_NESTING:
        return None
    body = saved(name)
    if body is None:
        return None
    return servers_a_script_names(body, config, saved, _seen=seen | {name})
