"""`serve`'s answer to `tools/list`: `bash` and the `keep_visible` proxies, built once per catalog.

A client lists tools at the start and after each `list_changed`; the SDK's 2026-07-28 transport
wants a tool's input schema on every `tools/call` carrying arguments (to check `Mcp-Param-*`
headers). So `bash`'s input schema is given statically (`input_schema`), and the list is built
once and kept while the catalog it came from is: the host's `CatalogMemo` returns the same
`Catalog` until a server starts, fails or restarts, its tool list changes (`list_changed` from
upstream), or a remembered list changes; the config is fixed for the host's life. It is built for
one listing session, made once (a new `Session` per listing would cost a shell and a catalog
build every time).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from toolshell.connections.base import ConnState
from toolshell.frontends.serve.bash_tool import (
    BASH_OUTPUT_SCHEMA,
    BASH_SCHEMA,
    BASH_TITLE,
    SHOWS_STRUCTURE,
    bash_description,
)
from toolshell.frontends.serve.list_notifier import ListNotifier
from toolshell.host import Host
from toolshell.registry.catalog import Catalog
from toolshell.registry.entry import ToolEntry
from toolshell.registry.masked import masked_catalog, masked_entry
from toolshell.session import Session

_STARTING = {ConnState.NOT_LOADED, ConnState.CONNECTING}


def reads_structure(ctx: ServerRequestContext[Any] | None) -> bool:
    """The calling client hands its model `structuredContent` in place of the text (`SHOWS_STRUCTURE`)."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    return getattr(info, "name", None) in SHOWS_STRUCTURE


def proxy_tool(flat: str, entry: ToolEntry) -> types.Tool:
    """A `keep_visible` tool as its server listed it: title, annotations and outputSchema kept."""
    annotations = dict(entry.annotations)
    if entry.title:
        annotations.setdefault("title", entry.title)
    return types.Tool(
        name=flat,
        title=entry.title,
        description=entry.description,
        input_schema=entry.input_schema,
        output_schema=entry.output_schema,
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
    )


class ToolList:
    """The `tools/list` handler and the static input-schema lookup of one `serve`.

    Args:
        host: The serving host.
        visible: The `keep_visible` tools by their flat names.
        notifier: Holds early listings until the startup servers settle, and tells listed
            sessions of changes; None: answer at once, tell nobody.
    """

    def __init__(self, host: Host, visible: dict[str, ToolEntry], notifier: ListNotifier | None = None) -> None:
        self.host, self.visible, self.notifier = host, visible, notifier
        self._session: Session | None = None
        self._kept: dict[bool, tuple[Catalog, types.ListToolsResult]] = {}  # by `reads_structure`
        self.builds = 0
        """Lists built (not reused) so far."""

    async def answer(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        if self.notifier is not None:
            await self.notifier.settled(self._starting)
            self.notifier.listed(ctx.session)  # after the wait: what settled meanwhile is in this answer
        if self._session is None:
            self._session = self.host.session()
        catalog = await self.host.catalog(self._session)
        structure = reads_structure(ctx)
        kept = self._kept.get(structure)
        if kept is not None and kept[0] is catalog:
            return kept[1]
        self.builds += 1
        bash = types.Tool(
            name="bash",
            title=BASH_TITLE,
            description=bash_description(*masked_catalog(catalog, self.host.redact)),  # what a server named, masked
            input_schema=BASH_SCHEMA,
            output_schema=None if structure else BASH_OUTPUT_SCHEMA,
        )
        proxies = (proxy_tool(flat, masked_entry(e, self.host.redact)) for flat, e in self.visible.items())
        listed = types.ListToolsResult(tools=[bash, *proxies])
        self._kept[structure] = (catalog, listed)
        return listed

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema without listing (the SDK's `get_tool_input_schema`)."""
        if name == "bash":
            return BASH_SCHEMA
        entry = self.visible.get(name)
        return None if entry is None else entry.input_schema

    def _starting(self) -> bool:
        """A startup server has not settled yet."""
        return any(s.load == "startup" and s.state in _STARTING for s in self.host.manager.statuses())
