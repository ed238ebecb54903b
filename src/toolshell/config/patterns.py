"""Tool patterns in config rules: `server:tool`, a trailing `*`, top-level tools as `tool` or `:tool`.

Used by `[approval] deny` / `require` and by `[[guard]] tool`. Names are compared folded (hyphens
are underscores, case ignored), the same way the `tools` command resolves names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from toolshell.errors import ConfigError


class Named(Protocol):
    """What a pattern matches against: a tool entry's server (None for a top-level tool) and name."""

    @property
    def server(self) -> str | None: ...
    @property
    def name(self) -> str: ...


def _fold(name: str) -> str:
    return name.replace("-", "_").lower()


def _part_matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return _fold(name).startswith(_fold(pattern[:-1]))
    return _fold(name) == _fold(pattern)


@dataclass(frozen=True)
class ToolPattern:
    """One parsed pattern. `server` None means a top-level tool (one that has no MCP server)."""

    text: str
    server: str | None
    tool: str

    def matches(self, entry: Named) -> bool:
        """True when `entry` is a tool this pattern names."""
        if self.server is None:
            return entry.server is None and _part_matches(self.tool, entry.name)
        return (
            entry.server is not None
            and _part_matches(self.server, entry.server)
            and _part_matches(self.tool, entry.name)
        )


def parse_pattern(text: str, place: str = "") -> ToolPattern:
    """Parse `github:delete-*`, `github:*`, `web_fetch` or `:web_fetch`.

    Args:
        text: the pattern as written in the config.
        place: where it was written (e.g. `approval.deny[0]`), named in the error.

    Raises:
        ConfigError: the pattern is empty or has a `*` anywhere but at the end of a part.
    """
    server, sep, tool = text.strip().partition(":")
    if not sep:
        server, tool = "", server
    problem = ""
    if not tool:
        problem = f"{text!r} names no tool; write `server:tool`, `server:*`, or `tool` for a top-level tool"
    elif "*" in server[:-1] or "*" in tool[:-1]:
        problem = (
            f"{text!r} has a '*' before the end of a name; only a trailing '*' is allowed (e.g. `github:delete-*`)"
        )
    if problem:
        raise ConfigError([(place, problem)])
    return ToolPattern(text=text, server=server or None, tool=tool)


def parse_patterns(texts: list[str], place: str) -> list[ToolPattern]:
    """Parse a config list of patterns; the error names the first bad one as `place[i]`."""
    return [parse_pattern(t, f"{place}[{i}]") for i, t in enumerate(texts)]


def first_match(patterns: list[ToolPattern], entry: Named) -> ToolPattern | None:
    """The first pattern that names `entry`, or None."""
    return next((p for p in patterns if p.matches(entry)), None)
