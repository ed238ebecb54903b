"""`setup HOST --move`: a host's other MCP servers become `[[mcp.servers]]` of a `toolshell.toml`,
so the agent sees one `bash` tool instead of each server's tools.

The host's entries are read as `mcpServers` JSON (each format's `read`), converted as `config
import` converts them (`config.import_mcp_json`, literal secrets lifted to `${VAR}`), checked as a
config is, and appended to the toolshell file with `tomlkit` (its comments and layout kept).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from toolshell.config import import_mcp_json, parse_config
from toolshell.config.lift import Lifted, lift_secrets
from toolshell.errors import ConfigError
from toolshell.frontends.hosts.files import HostFile, HostFileError


@dataclass
class Move:
    """What `--move` would do: the servers to move, the ones left (their name is taken), the
    secrets turned into variables, and the toolshell file's new text."""

    moved: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    lifted: list[Lifted] = field(default_factory=list)
    text: str = ""


def plan_move(host: HostFile, own_name: str, target: Path) -> Move:
    """The move of every server of `host` but `own_name` into the toolshell file `target`."""
    specs = {name: host.fmt.read(dict(_plain(spec))) for name, spec in host.servers().items() if name != own_name}
    doc = _read_target(target)
    taken = {str(s.get("name")) for s in _servers_of(doc)}
    move = Move(kept=[n for n in specs if n in taken])
    tables = import_mcp_json({"mcpServers": {n: s for n, s in specs.items() if n not in taken}})["mcp"]["servers"]
    move.lifted = lift_secrets(tables)
    try:
        parse_config({"mcp": {"servers": tables}}, expand=False, source=str(host.path))
    except ConfigError as e:
        raise HostFileError(f"{e}; nothing was moved") from None
    for table in tables:
        _append(doc, table)
        move.moved.append(str(table["name"]))
    move.text = tomlkit.dumps(doc)
    return move


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _read_target(target: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return tomlkit.document()
    except (OSError, UnicodeDecodeError, TOMLKitError) as e:
        raise HostFileError(f"cannot add servers to {target}: {e}; fix it first; nothing was moved") from None


def _servers_of(doc: tomlkit.TOMLDocument) -> list[Any]:
    mcp = doc.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    return list(servers) if isinstance(servers, list) else []


def _append(doc: tomlkit.TOMLDocument, server: dict[str, Any]) -> None:
    table = tomlkit.table()
    for key, value in server.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[key] = inline
        else:
            table[key] = value
    table.add(tomlkit.nl())
    mcp = doc.get("mcp")
    if mcp is None:
        mcp = tomlkit.table(is_super_table=True)
        doc["mcp"] = mcp
    servers = mcp.get("servers")
    if servers is None:
        mcp["servers"] = tomlkit.aot()
        servers = mcp["servers"]
    servers.append(table)


def toml_mode(config: Path, source: Path) -> int:
    """The permission bits of the toolshell file that servers move into: 0600 for a new one, the
    old file's otherwise, and never wider than the host file they come from."""
    try:
        base = stat.S_IMODE(config.lstat().st_mode)
    except FileNotFoundError:
        base = 0o600
    try:
        src = stat.S_IMODE(source.stat().st_mode)
    except FileNotFoundError:
        src = 0o600
    return (base & src) | (base & 0o700)
