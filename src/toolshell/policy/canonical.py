"""Stable text forms of inputs and tools, so grants and ratings compare what a person saw."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from toolshell.registry.entry import ToolEntry


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: two equal inputs give the same text.

    Args:
        value: a JSON-compatible value (a tool input, a schema).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def schema_hash(entry: ToolEntry) -> str:
    """A hash of the tool's input schema: a tool is rated again when its schema changes."""
    return _digest(entry.input_schema)


def fingerprint(entry: ToolEntry) -> str:
    """A hash of what a person approving the tool relied on: description, input schema, annotations.

    An "always" grant records it; a tool whose fingerprint changed is no longer the tool approved.
    """
    return _digest(
        {"description": entry.description, "input_schema": entry.input_schema, "annotations": entry.annotations}
    )


def server_key(entry: ToolEntry) -> str:
    """The server column for SQLite rows: top-level tools (server None) store ''."""
    return entry.server or ""
