"""A session's catalog, reused between its shell calls while nothing it is built from changed.

A build records what it read (`building.BuildInputs`: the role, the session's overlay, and for
each server its state, its last error, and the stamp of the tool list it got). Before building
again, the inputs are read once more, without listing or starting anything; when they are equal,
the build would read the same lists and give the same catalog, so the last one is returned. A
server that starts, fails or restarts, a `tools/list_changed`, a switch of the runtime overlay,
a role change, or a remembered list written by another process changes an input, and the next
shell call builds anew. A private list stays per session: the catalogs are kept per session.

The top-level tools come from toolshell's own web-fetch server, whose list never changes: it is
listed once per host.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Sequence

from toolshell.config import Config, ServerConfig
from toolshell.errors import ToolshellError
from toolshell.registry.building import BuildInputs, SessionLike, ToolSource, build_catalog, current_inputs
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ToolEntry
from toolshell.registry.filters import active_servers
from toolshell.registry.overlay import Overlays

TopLevel = Callable[[], Awaitable[Sequence[ToolEntry]]]
KEPT_ROLES = 64
"""The roles whose active servers are kept (`CatalogMemo.active`)."""


class CatalogMemo:
    """Builds each session's catalog, or returns its last one when the inputs are the same.

    Args:
        config: the host's config.
        source: the connections (`routing.ServerRouter`).
        overlays: the sessions' runtime switches.
        top_level: lists the top-level tools (toolshell's own static server); called until it succeeds once.
    """

    def __init__(self, config: Config, source: ToolSource, overlays: Overlays, top_level: TopLevel) -> None:
        self.config = config
        self.source = source
        self.overlays = overlays
        self._top_level = top_level
        self._top: Sequence[ToolEntry] | None = None
        self._kept: weakref.WeakKeyDictionary[SessionLike, tuple[BuildInputs, Catalog]] = weakref.WeakKeyDictionary()
        self._active: dict[str | None, tuple[ServerConfig, ...]] = {}
        self.builds = 0
        """Catalogs built (not reused) so far."""

    def active(self, role: str | None) -> Sequence[ServerConfig]:
        """The servers a session with `role` uses (`filters.active_servers`), made once per role: they
        follow from the config alone, which is the host's for its whole life (the router keeps its
        servers from it when the host opens; a changed config is a new host)."""
        servers = self._active.get(role)
        if servers is None:
            servers = tuple(active_servers(self.config, role))
            if len(self._active) < KEPT_ROLES:  # roles are few; a client naming endless tags keeps nothing more
                self._active[role] = servers
        return servers

    async def prime(self) -> None:
        """List the top-level tools now (while the servers start), so the first shell call need not."""
        if self._top is None:
            try:
                self._top = tuple(await self._top_level())
            except ToolshellError:
                pass  # the first shell call tries again, and says why

    def kept(self, session: SessionLike) -> Catalog | None:
        """The session's last catalog when a build now would give it again; None (building nothing)
        when it has none or its inputs changed."""
        kept = self._kept.get(session)
        if kept is not None and kept[0] == current_inputs(
            self.config, self.source, self.overlays, session, self.active(session.role)
        ):
            return kept[1]
        return None

    async def catalog(self, session: SessionLike) -> Catalog:
        """The session's catalog as a build now would give it."""
        kept = self.kept(session)
        if kept is not None:
            return kept
        if self._top is None:
            self._top = tuple(await self._top_level())
        record: list[BuildInputs] = []
        self.builds += 1
        catalog = await build_catalog(
            self.config, self.source, self.overlays, session=session, top_level=self._top, record=record
        )
        if record:
            self._kept[session] = (record[0], catalog)
        else:  # a listing failed: the next shell call asks again
            self._kept.pop(session, None)
        return catalog
