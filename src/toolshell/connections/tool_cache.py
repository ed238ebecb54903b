"""The tool list of one server, cached until restart or `notifications/tools/list_changed`.

A list the server marks `cacheScope: private` (2026-07-28) is kept per session id; any other
list is shared by every session. A generation counter makes sure a list fetched before an
invalidation is never stored after it. Each stored list gets a stamp, unique in the process, so
a catalog built from it can tell, without asking the server, whether it would still get that
same list (`registry.catalog_memo`).
"""

from __future__ import annotations

import itertools

import mcp_types as types
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolshell.registry.linear_regex import pattern_notes
from toolshell.registry.schema_cost import cost_note

MAX_PAGES = 100
"""A paginating server that never ends cannot hang a listing."""

TOOL_NAME_RE = re2.compile(r"[A-Za-z0-9_.-]{1,128}")  # linear time: names come from the server
"""The MCP tool-name form. Anything else (a newline, an escape sequence, a bidi override) could
forge output lines or make one tool look like another, so such a tool is not listed at all."""

MAX_REFUSED_NOTES = 5

_STAMPS = itertools.count(1)
"""Stamps of stored lists: never reused in the process, so equal stamps mean the same list."""


def refused_note(tools: list[types.Tool]) -> str | None:
    """What `toolshell servers` says about the tools left out for their names, or None."""
    bad = [t.name for t in tools if not TOOL_NAME_RE.fullmatch(t.name)]
    if not bad:
        return None
    shown = ", ".join(ascii(name) for name in bad[:MAX_REFUSED_NOTES])
    more = f" and {len(bad) - MAX_REFUSED_NOTES} more" if len(bad) > MAX_REFUSED_NOTES else ""
    return f"{len(bad)} tool(s) not listed: their names are not of the MCP form [A-Za-z0-9_.-]{{1,128}}: {shown}{more}"


def _schema_notes(schema: dict[str, object]) -> list[str]:
    """What checking inputs against this schema leaves out: patterns RE2 cannot run, or all but
    `type: object` when the check would take too much work."""
    cost = cost_note(schema)
    return [*pattern_notes(schema), *([cost] if cost else [])]


def capped_note(cap: int, dropped: int, unread: bool) -> str | None:
    """What `toolshell servers` says about the tools left out past `max_tools`, or None."""
    if not dropped and not unread:
        return None
    left = [f"{dropped:,} more were dropped"] if dropped else []
    left += ["its later pages were not read"] if unread else []
    return (
        f"it lists more tools than max_tools = {cap:,}: the first {cap:,} are kept, {' and '.join(left)}; "
        "raise max_tools for this server in the config to keep more"
    )


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
        self._shared: tuple[int, list[types.Tool]] | None = None
        self._private: dict[str, tuple[int, list[types.Tool]]] = {}
        self.last_count: int | None = None
        self.notes: list[str] = []
        self._noted: list[types.Tool] | None = None  # the list the notes below were computed for
        self._refused: list[str] = []
        self._schema_notes: list[str] = []

    def get(self, session_id: str) -> list[types.Tool] | None:
        kept = self._kept(session_id)
        return None if kept is None else kept[1]

    def stamp(self, session_id: str) -> int | None:
        """The stamp of the list `get` returns for this session; None when it has none (a call would fetch)."""
        kept = self._kept(session_id)
        return None if kept is None else kept[0]

    def _kept(self, session_id: str) -> tuple[int, list[types.Tool]] | None:
        if session_id in self._private:
            return self._private[session_id]
        return self._shared

    def put(
        self,
        fetched: list[types.Tool],
        *,
        private: bool,
        session_id: str,
        generation: int,
        capped: str | None = None,
    ) -> list[types.Tool]:
        """Store a fetched list, unless the cache was invalidated since the fetch began; return the
        tools that may be listed (those with a well-formed name). `capped` says what the listing left out."""
        tools = [t for t in fetched if TOOL_NAME_RE.fullmatch(t.name)]
        if fetched != self._noted:  # a private list fetched again per session: its notes are the same
            note = refused_note(fetched)
            self._schema_notes = [f"tool {t.name}: {n}" for t in tools for n in _schema_notes(t.input_schema)]
            self._refused = [note] if note else []
            self._noted = list(fetched)
        self.notes = [*([capped] if capped else []), *self._refused, *self._schema_notes]
        self.last_count = len(tools)
        if generation != self.generation:
            return list(tools)
        current = self._private.get(session_id) if private else self._shared
        if current is not None and current[1] == tools:  # the same list again (sessions listing at once)
            return list(current[1])  # the stored one, its stamp kept: catalogs built from either stay reusable
        kept = (next(_STAMPS), tools)
        if private:
            self._private[session_id] = kept
        else:
            self._shared = kept
        return list(tools)

    def invalidate(self) -> None:
        self.generation += 1
        self._shared = None
        self._private.clear()

    def drop_session(self, session_id: str) -> None:
        self._private.pop(session_id, None)
