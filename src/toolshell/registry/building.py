"""Building a session's catalog from the servers' tool lists, the filters, roles and its overlay.

A shell call gets the catalog as it is when the call first needs it (so a server added or changed
during a session shows up on the next one), and again when a call loads a lazy server. A build
records what it read (`BuildInputs`), so an unchanged catalog can be reused instead of rebuilt
(`registry.catalog_memo`). Building never starts or retries a server: a broken server must not
slow every shell call; a call that names it retries it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

from toolshell.config import Config, ServerConfig
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import Redactor
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ServerInfo, ToolEntry, entry_from_tool
from toolshell.registry.filters import active_servers, filter_entries
from toolshell.registry.overlay import Overlays
from toolshell.registry.server_identity import server_identity


class SessionLike(Protocol):
    """The session a catalog is built for."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str | None: ...


class ToolSource(Protocol):
    """Where the tool lists come from (the connections, for the host)."""

    def state(self, server: str) -> str | None:
        """The server's connection state (`ready`, `not_loaded`, `failed`…); None if it has none."""
        ...

    def last_error(self, server: str) -> str | None: ...

    async def list_tools(self, server: ServerConfig, session: Any) -> list[Any]:
        """The MCP `Tool`s the server lists for this session. Raises `ToolshellError`."""
        ...

    def recall(self, server: ServerConfig) -> list[Any] | None:
        """The server's remembered `Tool`s, read without starting it; None when none are."""
        ...

    def list_stamp(self, server: ServerConfig, session: Any) -> int | None:
        """A stamp of the list `list_tools` would give this session from cache, unique to that list;
        None when it would fetch one."""
        ...

    def recall_stamp(self, server: ServerConfig) -> Hashable:
        """A stamp of the list `recall` would give (equal stamps: the same list); None when none."""
        ...


ServerRead = tuple[str, str | None, str | None, Hashable]
"""What a build read of one server: its name, state, last error (when not ready), and the stamp
of the list it got (the live one when ready, the remembered one when not yet started)."""


@dataclasses.dataclass(frozen=True)
class BuildInputs:
    """Everything a catalog was built from. Two builds with equal inputs give equal catalogs."""

    role: str | None
    disabled: frozenset[str]
    unlocked: frozenset[tuple[str, str]]
    servers: tuple[ServerRead, ...]


async def build_catalog(
    config: Config,
    source: ToolSource,
    overlays: Overlays,
    *,
    session: SessionLike,
    top_level: Sequence[ToolEntry] = (),
    record: list[BuildInputs] | None = None,
) -> Catalog:
    """The tools a session can call now: its role's active servers, filtered, plus the overlay.

    With `record`, what the build read is appended to it: unless a listing failed (then a rebuild
    would ask again, and nothing is recorded).
    """
    session_id, role = session.id, session.role
    role_cfg = config.role_named(role)
    disabled = frozenset(overlays.disabled(session_id))
    unlocked = frozenset(overlays.unlocked(session_id))
    infos: list[ServerInfo] = []
    entries: list[ToolEntry] = []
    reads: list[ServerRead] = []
    redact = Redactor(config.secrets)
    for server in active_servers(config, role):
        if server.name in disabled:
            continue
        read = read_server(source, server, session)  # before the listing: a change during it is seen next time
        tools, info, listed = await _server_tools(source, server, session, redact)
        if read[1] == "ready":
            read = (*read[:3], await _stamp_of(source, server, session, listed) if info.state == "ready" else None)
        reads.append(read)
        if info.state in _NOT_YET and (recalled := source.recall(server)) is not None:
            tools = _entries(server, recalled, redact)
            info = dataclasses.replace(info, remembered=True)
        shown = filter_entries(tools, server, role_cfg)
        shown += [
            e for e in filter_entries(tools, None, role_cfg) if (server.name, e.name) in unlocked and e not in shown
        ]
        infos.append(dataclasses.replace(info, tool_count=len(shown)) if info.loaded or info.remembered else info)
        entries += shown
    if record is not None and all(r[1] != "ready" or r[3] is not None for r in reads):
        record.append(BuildInputs(role, disabled, unlocked, tuple(reads)))
    return Catalog(infos, entries, top_level, disabled=sorted(disabled))


def read_server(source: ToolSource, server: ServerConfig, session: SessionLike) -> ServerRead:
    """What a build reads of one server, read now without listing or starting anything."""
    state = source.state(server.name)
    if state == "ready":
        return server.name, state, None, source.list_stamp(server, session)
    last_error = source.last_error(server.name) if state not in (None, "not_loaded") else None
    recalled = source.recall_stamp(server) if state in _NOT_YET else None
    return server.name, state, last_error, recalled


def current_inputs(
    config: Config,
    source: ToolSource,
    overlays: Overlays,
    session: SessionLike,
    active: Sequence[ServerConfig] | None = None,
) -> BuildInputs:
    """The inputs a build for this session would read now (see `BuildInputs`), without building.

    `active`: the role's active servers when the caller keeps them (`active_servers`, a function
    of the config and the role alone)."""
    disabled = frozenset(overlays.disabled(session.id))
    if active is None:
        active = active_servers(config, session.role)
    servers = tuple(read_server(source, s, session) for s in active if s.name not in disabled)
    return BuildInputs(session.role, disabled, frozenset(overlays.unlocked(session.id)), servers)


async def _server_tools(
    source: ToolSource, server: ServerConfig, session: Any, redact: Redactor
) -> tuple[list[ToolEntry], ServerInfo, list[Any]]:
    """The server's entries, what the catalog says of it, and the MCP tools they were made from."""
    state = source.state(server.name)
    if state is None:
        return [], ServerInfo(server.name, loaded=False, tool_count=0, state="disabled"), []
    if state == "not_loaded":
        return [], ServerInfo(server.name, loaded=False, tool_count=0, state=state), []
    if state != "ready":
        info = ServerInfo(
            server.name, loaded=True, tool_count=0, state=state, last_error=source.last_error(server.name)
        )
        return [], info, []
    try:
        tools = await source.list_tools(server, session)
    except ToolshellError as e:
        state = "needs_auth" if e.code == ErrorCode.CONNECTION_REQUIRED else "failed"
        return [], ServerInfo(server.name, loaded=True, tool_count=0, state=state, last_error=e.message), []
    entries = _entries(server, tools, redact)
    return entries, ServerInfo(server.name, loaded=True, tool_count=len(entries), state="ready"), tools


async def _stamp_of(source: ToolSource, server: ServerConfig, session: Any, listed: list[Any]) -> Hashable:
    """The stamp of the list this build got, or None (then nothing is reused and the next shell
    call builds anew). A listing that began before a `tools/list_changed` is not stored, and the
    cache may meanwhile hold a newer list another session fetched: the stamp is that list's only
    when it holds the very tools this build got."""
    cached = await source.list_tools(server, session)  # from the cache when this build's list was stored
    stamp = source.list_stamp(server, session)  # no await since `cached`: that list's stamp
    same = len(cached) == len(listed) and all(a is b for a, b in zip(cached, listed, strict=True))
    return stamp if same else None


_NOT_YET = ("not_loaded", "connecting")
"""States in which a server's remembered list stands in for the live one (help, search, plan)."""


def _entries(server: ServerConfig, tools: list[Any], redact: Redactor) -> list[ToolEntry]:
    hints = server.type == "builtin" or (server.trusted and "trusted" in server.model_fields_set)
    identity = server_identity(server, redact)  # grants and ratings belong to the program, not the name
    return [entry_from_tool(server.name, t, server.trusted, hints, identity.id, identity.label) for t in tools]
