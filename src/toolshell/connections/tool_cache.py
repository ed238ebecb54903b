"""The tool list of one server, cached until restart or `notifications/tools/list_changed`.

A list the server marks `cacheScope: private` (2026-07-28) is kept per session id; any other
list is shared by every session. A generation counter makes sure a list fetched before an
invalidation is never stored after it.
"""

from __future__ import annotations

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

MAX_PAGES = 100
"""A paginating server that never ends cannot hang a listing."""


def is_private(result: types.ListToolsResult, protocol_version: str | None) -> bool:
    """Whether the server marked this list private. Before 2026-07-28 there is no such field
    (the SDK's model defaults it to "private", so only a value that came over the wire counts)."""
    return (
        protocol_version in MODERN_PROTOCOL_VERSIONS
        and "cache_scope" in result.model_fields_set
        and result.cache_scope == "private"
    )


class ToolCache:
    """Shared and per-session tool lists of one connection."""

    def __init__(self) -> None:
        self.generation = 0
        self._shared: list[types.Tool] | None = None
        self._private: dict[str, list[types.Tool]] = {}
        self.last_count: int | None = None

    def get(self, session_id: str) -> list[types.Tool] | None:
        if session_id in self._private:
            return self._private[session_id]
        return self._shared

    def put(self, tools: list[types.Tool], *, private: bool, session_id: str, generation: int) -> None:
        """Store a fetched list, unless the cache was invalidated since the fetch began."""
        self.last_count = len(tools)
        if generation != self.generation:
            return
        if private:
            self._private[session_id] = tools
        else:
            self._shared = tools

    def invalidate(self) -> None:
        self.generation += 1
        self._shared = None
        self._private.clear()

    def drop_session(self, session_id: str) -> None:
        self._private.pop(session_id, None)
