"""A tool as the registry sees it: where it lives, what it takes, what it declares about itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class ToolEntry:
    """One callable tool.

    `server` is the MCP server name, or None for a top-level tool (e.g. `web_fetch`).
    `annotations` keeps the MCP camelCase keys (`readOnlyHint`, `destructiveHint`, ...), only those
    the tool declared: a missing key means "declares nothing", which policy needs to tell apart.
    """

    server: str | None
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    annotations: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    trusted: bool = True
    title: str | None = None
    """The tool's display title (`Tool.title`, else the annotations' `title`)."""
    hints: bool = True
    """Whether the tool's hints reach the model: built-in servers' do, and external servers' only when
    the config says `trusted = true` for them explicitly (a hint goes straight to the model)."""
    server_id: str = ""
    """The identity of the program serving it (`registry.server_identity`): grants and ratings are
    bound to it. Empty for a top-level tool and an entry made in-process without a config."""
    server_label: str = ""
    """That program for people: its command line, URL or module, secrets masked."""

    @property
    def flat_name(self) -> str:
        """`mcp_<server>__<tool>` for an MCP tool, the plain name for a top-level tool."""
        return f"mcp_{self.server}__{self.name}" if self.server else self.name

    @cached_property
    def command(self) -> str:
        """How a script writes it: `tools github list-pulls`, `tools web-fetch`. Made once per entry
        (its fields are frozen): every call names it in its report, timeline row and errors."""
        parts = [self.server, self.name] if self.server else [self.name]
        return "tools " + " ".join(p.replace("_", "-") for p in parts)

    def __hash__(self) -> int:
        return hash((self.server, self.name))


@dataclass
class ServerInfo:
    """A configured server as the catalog lists it."""

    name: str
    loaded: bool
    tool_count: int
    state: str = "ready"
    description: str = ""
    last_error: str | None = None
    """Why a server that is not ready is not (its connection's last error), for the call's error."""
    remembered: bool = False
    """Not loaded, but its tools are known from the list it gave before (`connections.remembered`)."""


def entry_from_tool(
    server: str | None, tool: Any, trusted: bool, hints: bool = True, server_id: str = "", server_label: str = ""
) -> ToolEntry:
    """The entry of an MCP `Tool` a server listed (`server` None: a top-level tool), served by the
    program `server_id` names (`registry.server_identity`)."""
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    annotation_title = annotations.pop("title", None)
    return ToolEntry(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        annotations=annotations,
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
        trusted=trusted,
        title=getattr(tool, "title", None) or annotation_title,
        hints=hints,
        server_id=server_id,
        server_label=server_label,
    )
