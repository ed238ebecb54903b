"""Tool entries, naming, filters and roles, search, and input validation. Pure: no I/O.

Submodules are imported on first use of a name, so `import toolshell.registry` stays cheap
(`filters` pulls in the pydantic config models, `validate` jsonschema).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolshell.registry.catalog import Catalog, Duplicate, Lookup
    from toolshell.registry.entry import ServerInfo, ToolEntry
    from toolshell.registry.filters import (
        active_servers,
        configured_servers,
        filter_entries,
        role_allows,
        role_problems,
        tool_allowed,
    )
    from toolshell.registry.naming import command_text, command_words, flat_name, fold, parse_flat_name
    from toolshell.registry.search import SearchHit, tokenize
    from toolshell.registry.validate import resolve_key, schema_problem, validate_input

_WHERE = {
    "Catalog": "catalog",
    "Duplicate": "catalog",
    "Lookup": "catalog",
    "ServerInfo": "entry",
    "ToolEntry": "entry",
    "active_servers": "filters",
    "configured_servers": "filters",
    "filter_entries": "filters",
    "role_allows": "filters",
    "role_problems": "filters",
    "tool_allowed": "filters",
    "command_text": "naming",
    "command_words": "naming",
    "flat_name": "naming",
    "fold": "naming",
    "parse_flat_name": "naming",
    "SearchHit": "search",
    "tokenize": "search",
    "resolve_key": "validate",
    "schema_problem": "validate",
    "validate_input": "validate",
}

__all__ = [
    "Catalog",
    "Duplicate",
    "Lookup",
    "SearchHit",
    "ServerInfo",
    "ToolEntry",
    "active_servers",
    "command_text",
    "command_words",
    "configured_servers",
    "filter_entries",
    "flat_name",
    "fold",
    "parse_flat_name",
    "resolve_key",
    "role_allows",
    "role_problems",
    "schema_problem",
    "tokenize",
    "tool_allowed",
    "validate_input",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'toolshell.registry' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"toolshell.registry.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
