"""The catalog a shell call sees: servers, their tools and the top-level tools, with lookup by the
words a script writes, by flat name, and by search.

Rules (DESIGN §4):
- Every word is compared folded (`-` = `_`, any case).
- Two tools that collide once folded (same command words or same flat name): the first wins (the
  first configured server, then the server's own list order); the other is listed in `duplicates`
  and cannot be called. Two servers whose names fold alike: the first configured wins and the
  other's tools cannot be called.
- A server name that is also a top-level tool name: `tools <name>` names the server (servers are
  what a person configured; a top-level tool is reached through its flat name and the note says
  so).
- A flat name (`tools mcp_github__get_pull`) names its tool when nothing else matched the first
  word. It is also the way to reach the tools of a server named like a `tools` verb (`search`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.entry import ServerInfo, ToolEntry
from toolshell.registry.naming import command_text, fold, parse_flat_name
from toolshell.registry.search import SearchHit, SearchIndex, tokenize

LookupKind = Literal["tool", "server", "unloaded_server"]
_CUTOFF = 0.6
_SERVER_TOOL_CUTOFF = 0.5
_MAX_SUGGESTIONS = 3


@dataclass(frozen=True)
class Lookup:
    """What the leading words of a `tools` argv name, and the words after them (`rest`).

    `kind` is `"tool"` (`entry` set; `server` set for an MCP tool), `"server"` (a server named
    alone: help or a server that is not ready), or `"unloaded_server"` (load it, rebuild the
    catalog, look up again).
    """

    kind: LookupKind
    server: ServerInfo | None
    entry: ToolEntry | None
    rest: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Duplicate:
    """Two names that fold alike; only `winner` can be called as `command`.

    `kind`: `"tool"` (two tools; `winner`/`loser` are flat names), `"server"` (two servers;
    server names), `"tool_vs_server"` (a top-level tool, `loser`, named like server `winner`).
    """

    kind: Literal["tool", "server", "tool_vs_server"]
    command: str
    winner: str
    loser: str

    def note(self) -> str:
        """The sentence `tools --help` and diagnostics show."""
        if self.kind == "server":
            return (
                f"servers '{self.winner}' and '{self.loser}' have the same name once hyphens, underscores and case "
                f"are ignored; `{self.command}` is '{self.winner}' (configured first) and the tools of "
                f"'{self.loser}' cannot be called; rename one of them."
            )
        if self.kind == "tool_vs_server":
            return (
                f"the tool '{self.loser}' has the same name as server '{self.winner}'; `{self.command}` names the "
                f"server, so '{self.loser}' cannot be called from the shell; rename the server to reach it."
            )
        return (
            f"`{self.command}` matches two tools once hyphens, underscores and case are ignored: {self.winner} "
            f"and {self.loser}; {self.winner} (configured first) is called and {self.loser} cannot be."
        )


def _looks_like_input(word: str) -> bool:
    """A JSON argument, a `key=value` pair, a `--flag` or `-`: input, not a tool name."""
    return word.startswith(("-", "{", "[", '"')) or "=" in word


def _spoken(word: str) -> str:
    return word.replace("_", "-").lower()


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


class Catalog:
    """Tools of one shell call. Pure: built from lists, never connects to anything.

    Args:
        servers: every configured server for the session, in configured order (loaded or not).
        entries: the MCP tools of the loaded servers (each `entry.server` names one of `servers`).
        top_level: tools that are not from MCP servers (`web_fetch`).
        disabled: servers the session switched off (not listed; named in the error of a call).
    """

    def __init__(
        self,
        servers: Sequence[ServerInfo],
        entries: Sequence[ToolEntry],
        top_level: Sequence[ToolEntry] = (),
        disabled: Sequence[str] = (),
    ) -> None:
        self._servers = list(servers)
        self._disabled = {fold(name): name for name in disabled}
        self._server_by_key: dict[str, ServerInfo] = {}
        self._duplicates: list[Duplicate] = []
        self._owner: dict[tuple[str, ...] | str, ToolEntry] = {}
        self._index: SearchIndex | None = None
        for server in self._servers:
            self._add_server(server)
        order = {s.name: i for i, s in enumerate(self._servers)}
        for e in entries:
            if e.server not in order:
                raise ValueError(f"tool {e.flat_name!r} names server {e.server!r}, which is not in `servers`")
        ranked = sorted(entries, key=lambda e: order[e.server or ""])  # stable: keeps each server's order
        self._entries = [e for e in ranked if self._is_server_winner(e) and self._claim(e)]
        self._top_level = [e for e in top_level if self._claim(e)]
        self._shadowed = {fold(e.name) for e in self._top_level if fold(e.name) in self._server_by_key}
        for e in self._top_level:
            if fold(e.name) in self._shadowed:
                server = self._server_by_key[fold(e.name)]
                self._duplicates.append(Duplicate("tool_vs_server", command_text(server.name), server.name, e.name))

    # --- building ------------------------------------------------------------------------------

    def _add_server(self, server: ServerInfo) -> None:
        key = fold(server.name)
        winner = self._server_by_key.setdefault(key, server)
        if winner is not server:
            self._duplicates.append(Duplicate("server", command_text(winner.name), winner.name, server.name))

    def _is_server_winner(self, entry: ToolEntry) -> bool:
        return self._server_by_key[fold(entry.server or "")].name == entry.server

    def _claim(self, entry: ToolEntry) -> bool:
        """Register the entry under its folded command words and flat name, unless taken."""
        keys: list[tuple[str, ...] | str] = [
            (fold(entry.server), fold(entry.name)) if entry.server else (fold(entry.name),),
            fold(entry.flat_name),
        ]
        winner = next((self._owner[k] for k in keys if k in self._owner), None)
        if winner is not None:
            self._duplicates.append(Duplicate("tool", winner.command, winner.flat_name, entry.flat_name))
            return False
        for k in keys:
            self._owner[k] = entry
        return True

    # --- views -----------------------------------------------------------------------------------

    @property
    def servers(self) -> list[ServerInfo]:
        """Every server given, in configured order (including one shadowed by a duplicate name)."""
        return list(self._servers)

    @property
    def entries(self) -> list[ToolEntry]:
        """The callable MCP tools, in configured server order (duplicate losers left out)."""
        return list(self._entries)

    @property
    def top_level(self) -> list[ToolEntry]:
        """The callable top-level tools (duplicate losers left out)."""
        return list(self._top_level)

    @property
    def duplicates(self) -> list[Duplicate]:
        """Names that fold alike, with which one wins."""
        return list(self._duplicates)

    def duplicate_notes(self) -> list[str]:
        """One sentence per duplicate, for `tools --help` and diagnostics."""
        return [d.note() for d in self._duplicates]

    def disabled_server(self, word: str) -> str | None:
        """The server the session switched off that `word` names, or None."""
        return self._disabled.get(fold(word))

    def server(self, name: str) -> ServerInfo | None:
        """The server a (folded) name refers to."""
        return self._server_by_key.get(fold(name))

    def server_entries(self, name: str) -> list[ToolEntry]:
        """The callable tools of one server (folded name), in its own order."""
        server = self.server(name)
        return [e for e in self._entries if server is not None and e.server == server.name]

    def entry_for(self, server: str | None, tool: str) -> ToolEntry | None:
        """The callable tool `tool` of `server` (None: a top-level tool), names folded."""
        key = (fold(server), fold(tool)) if server else (fold(tool),)
        return self._owner.get(key)

    def by_flat_name(self, flat: str) -> ToolEntry | None:
        """The callable tool with this flat name (`mcp_github__list_pulls`, `web_fetch`), folded."""
        return self._owner.get(fold(flat))

    # --- lookup ----------------------------------------------------------------------------------

    def lookup(self, words: Sequence[str]) -> Lookup:
        """Resolve the leading words of a `tools` argv; the words after the target are `rest`.

        Raises:
            ToolshellError: `unknown_command` with the nearest names when nothing matches.
        """
        words = list(words)
        if not words:
            raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, "name a server or a tool; run `tools --help` for the list.")
        server = self._server_by_key.get(fold(words[0]))
        if server is not None:
            return self._lookup_in_server(server, words)
        entry = self._owner.get((fold(words[0]),))
        if entry is not None:
            return Lookup("tool", None, entry, words[1:])
        flat = self._lookup_flat(words)
        if flat is not None:
            return flat
        raise self._unknown(words)

    def _lookup_flat(self, words: list[str]) -> Lookup | None:
        """`mcp_<server>__<tool>` as one word; None when it is not shaped like a flat name."""
        entry = self.by_flat_name(words[0])
        if entry is not None:
            return Lookup("tool", self.server(entry.server or ""), entry, words[1:])
        folded = fold(words[0])
        server_name, tool = parse_flat_name(folded)
        server = self.server(server_name) if server_name else None
        if server is None:
            return None
        if len(folded) == len(words[0]):  # show the tool as written, not folded
            tool = words[0][len(words[0]) - len(tool) :]
        if not server.loaded:  # the caller loads it and looks the same words up again
            return Lookup("unloaded_server", server, None, words[1:])
        if server.state != "ready" and not self.server_entries(server.name):
            return Lookup("server", server, None, words[1:])
        raise self._unknown_in_server(server, tool)

    def _lookup_in_server(self, server: ServerInfo, words: list[str]) -> Lookup:
        if not server.loaded and not server.remembered:
            return Lookup("unloaded_server", server, None, words[1:])
        if not server.loaded and len(words) > 1 and (fold(server.name), fold(words[1])) not in self._owner:
            return Lookup("unloaded_server", server, None, words[1:])  # not in the remembered list: ask the live one
        if len(words) > 1:
            entry = self._owner.get((fold(server.name), fold(words[1])))
            if entry is not None:
                return Lookup("tool", server, entry, words[2:])
        not_ready = server.state != "ready" and not self.server_entries(server.name)
        if len(words) == 1 or _looks_like_input(words[1]) or not_ready:
            return Lookup("server", server, None, words[1:])
        raise self._unknown_in_server(server, words[1])

    def _unknown(self, words: list[str]) -> ToolshellError:
        suggestions = self._suggest(words)
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else "."
        return ToolshellError(
            ErrorCode.UNKNOWN_COMMAND,
            f"no tool or server named '{words[0]}'{hint} Run `tools --help` for the list.",
            detail={"suggestions": suggestions},
        )

    def _unknown_in_server(self, server: ServerInfo, word: str) -> ToolshellError:
        scored = [(_ratio(_spoken(word), _spoken(e.name)), e.command) for e in self.server_entries(server.name)]
        suggestions = _best(scored, _SERVER_TOOL_CUTOFF)
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else "."
        return ToolshellError(
            ErrorCode.UNKNOWN_COMMAND,
            f"server '{server.name}' has no tool named '{word}'{hint} "
            f"Run `{command_text(server.name)} --help` for its tools.",
            detail={"suggestions": suggestions},
        )

    def _suggest(self, words: list[str]) -> list[str]:
        """Nearest commands: server names and top-level tools against the first word; MCP tools
        against the first two words or, for a forgotten server, the first word alone."""
        first = _spoken(words[0])
        flat_server, flat_tool = parse_flat_name(fold(words[0]))
        if flat_server is not None:  # a flat name with a misspelt server: compare "server tool"
            pair = f"{_spoken(flat_server)} {_spoken(flat_tool)}"
            return _best(
                [(_ratio(pair, f"{_spoken(e.server or '')} {_spoken(e.name)}"), e.command) for e in self._entries],
                _CUTOFF,
            )
        pair = first if len(words) < 2 or _looks_like_input(words[1]) else f"{first} {_spoken(words[1])}"
        scored = [(_ratio(first, _spoken(s.name)), command_text(s.name)) for s in self._server_by_key.values()]
        scored += [(_ratio(first, _spoken(e.name)), e.command) for e in self._top_level]
        for e in self._entries:
            spoken = _spoken(e.name)
            scored.append((max(_ratio(pair, f"{_spoken(e.server or '')} {spoken}"), _ratio(first, spoken)), e.command))
        return _best(scored, _CUTOFF)

    # --- search ----------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """Callable tools ranked by BM25 over name, server, description and parameters."""
        if self._index is None:
            self._index = SearchIndex(self._entries + self._top_level)
        return self._index.search(query, limit)

    def unloaded_servers_matching(self, query: str) -> list[str]:
        """Servers not loaded yet, and with no remembered list to search, whose name or description
        shares a word with the query, so the caller can load them and search again. A server with a
        remembered list is searched as it is, without starting it; the first call starts it."""
        terms = set(tokenize(query))
        return [
            s.name
            for s in self._server_by_key.values()
            if not s.loaded and not s.remembered and terms & set(tokenize(f"{s.name} {s.description}"))
        ]

    def unsearched(self) -> list[ServerInfo]:
        """Servers whose tools no search sees: never listed (an `on_demand` server not started, with
        no remembered list) or not ready (failed, needs login) with none remembered. A server the
        session switched off is left out: it is off on purpose."""
        return [
            s
            for s in self._server_by_key.values()
            if s.state != "disabled" and not s.remembered and (not s.loaded or s.state != "ready")
        ]


def _best(scored: list[tuple[float, str]], cutoff: float) -> list[str]:
    """Up to three distinct names scoring at least `cutoff`, best first, ties in catalog order."""
    ranked = sorted((item for item in enumerate(scored) if item[1][0] >= cutoff), key=lambda t: (-t[1][0], t[0]))
    return list(dict.fromkeys(name for _, (_, name) in ranked))[:_MAX_SUGGESTIONS]
