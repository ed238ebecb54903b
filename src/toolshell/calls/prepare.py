"""Validate, then execute: the pure first step of every call.

`prepare(catalog, argv, stdin)` resolves the words a script wrote, builds the input (DESIGN §4
precedence) and checks it against the tool's schema. It does no I/O, so `tools plan`, the
before-start check, `Host.call_tool`, the LLM adapters and `toolshell serve` all share it. A call
whose server must be started first goes through `calls.view.CatalogView.ensure_loaded` before.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from toolshell.command.inputs import build_input
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.catalog import Catalog, Lookup
from toolshell.registry.entry import ToolEntry
from toolshell.registry.validate import validate_input
from toolshell.safe_text import escape


@dataclass(frozen=True)
class PreparedCall:
    """A resolved tool and an input that passed its schema: ready to send."""

    entry: ToolEntry
    input: dict[str, Any]
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """What a person should know before trusting the result: arguments the schema does not name."""

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
    return PreparedCall(entry, arguments, unnamed_arguments(entry, arguments))


def unnamed_arguments(entry: ToolEntry, arguments: dict[str, Any]) -> tuple[str, ...]:
    """A warning per argument the schema's `properties` do not name, with the nearest property.

    A schema that closes the object (`additionalProperties: false`) already refused them; one that
    leaves it open (third-party schemas often do) takes them, and the tool most likely ignores a
    typo. No warning when the schema invites other keys (`additionalProperties` given, or
    `patternProperties`) or names no properties at all.
    """
    schema = entry.input_schema
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return ()
    if "additionalProperties" in schema or "patternProperties" in schema:
        return ()
    unnamed = [key for key in arguments if key not in properties]
    if not unnamed:  # the common case: nothing to say
        return ()
    names = [str(p) for p in properties]
    return tuple(_unnamed(entry, key, names) for key in unnamed)


def _unnamed(entry: ToolEntry, key: str, names: list[str]) -> str:
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else f"it takes {', '.join(sorted(names)[:8])}"
    return escape(  # the names are the server's, the key the script's: either may hold controls
        f"tools: warning: {entry.command} has no argument {key!r} ({hint}); the call was sent with it, "
        f"and the tool may ignore it (`{entry.command} --help` shows its input)"
    )


def resolve(catalog: Catalog, words: Sequence[str], look: Lookup | None = None) -> tuple[ToolEntry, list[str]]:
    """The tool the leading words name, and the words after it; `look` is their lookup in this
    very catalog when the caller has it (`CatalogView.ensure_loaded`)."""
    look = lookup(catalog, words) if look is None else look
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
