"""Validate, then execute: the pure first step of every call.

`prepare(catalog, argv, stdin)` resolves the words a script wrote, builds the input (DESIGN §4
precedence) and checks it against the tool's schema. It does no I/O, so `tools plan`, the
before-start check, `Host.call_tool`, the LLM adapters and `toolshell serve` all share it. A call
whose server must be started first goes through `calls.view.CatalogView.ensure_loaded` before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolshell.command.inputs import build_input
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.catalog import Catalog, Lookup
from toolshell.registry.entry import ToolEntry
from toolshell.registry.validate import validate_input


@dataclass(frozen=True)
class PreparedCall:
    """A resolved tool and an input that passed its schema: ready to send."""

    entry: ToolEntry
    input: dict[str, Any]

    @property
    def call(self) -> dict[str, Any]:
        """How the stop report names the call: `{"tool": "tools github delete-branch", "input": {…}}`."""
        return {"tool": self.entry.command, "input": self.input}


def prepare(catalog: Catalog, argv: Sequence[str], stdin: str | None) -> PreparedCall:
    """Resolve `argv` (`[server, tool, k=v …]` or `[top-level-tool, …]`), build and validate the input.

    Raises:
        ToolshellError: `unknown_command` (with the nearest names), `unavailable` (a server that
            is not ready or is switched off), `invalid_input` (with the failing path).
    """
    entry, rest = resolve(catalog, argv)
    return prepare_input(entry, build_input(rest, stdin, entry.input_schema))


def prepare_input(entry: ToolEntry, arguments: dict[str, Any]) -> PreparedCall:
    """Check an input built elsewhere (a direct call, a `keep_visible` proxy) against the schema."""
    validate_input(entry, arguments)
    return PreparedCall(entry, arguments)


def resolve(catalog: Catalog, words: Sequence[str]) -> tuple[ToolEntry, list[str]]:
    """The tool the leading words name, and the words after it."""
    look = lookup(catalog, words)
    if look.kind == "tool" and look.entry is not None:
        return look.entry, look.rest
    name = look.server.name if look.server else words[0]
    if look.server is not None and look.server.state != "ready":
        why = f": {look.server.last_error}" if look.server.last_error else ""
        raise ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"server {name!r} is not available{why}; `toolshell servers` shows its state and stderr",
            retryable=True,
        )
    raise ToolshellError(
        ErrorCode.UNKNOWN_COMMAND,
        f"'tools {name}' names a server, not a tool; run `tools {name} --help` to list its tools",
    )


def lookup(catalog: Catalog, words: Sequence[str]) -> Lookup:
    """`Catalog.lookup`, with a clearer error than "no such tool" for a server the session switched off."""
    try:
        return catalog.lookup(words)
    except ToolshellError as err:
        name = catalog.disabled_server(words[0]) if words else None
        if name is None:
            raise
        raise ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"server {name!r} is disabled for this session; `tools runtime mcp action=enable server={name}` "
            "turns it on again",
        ) from err
