"""Reading a host's config file and writing it back with one entry changed, and nothing else.

JSON keeps its key order and its indentation (an entry replaced stays where it was, a new one goes
last); TOML is edited with `tomlkit`, which keeps comments and formatting. A file that does not
parse is refused, never rewritten. Writing it is `writing.Writer`'s (backups, no links followed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from toolshell.frontends.hosts.formats import HostFormat

_INDENT = re.compile(r"\n([ \t]+)\S")


class HostFileError(Exception):
    """A host file toolshell will not touch, with what to do about it."""


@dataclass
class HostFile:
    """A host's config file as read: `doc` is a dict (JSON) or a tomlkit document (TOML)."""

    path: Path
    fmt: HostFormat
    text: str | None  # None: the file does not exist yet
    doc: Any

    def servers(self) -> dict[str, Any]:
        """The host's servers table (empty when there is none)."""
        table = self.doc.get(self.fmt.key)
        if table is None:
            return {}
        if not isinstance(table, dict):
            raise HostFileError(f"{self.path}: `{self.fmt.key}` is not an object of servers; fix it by hand first")
        return table

    def with_entry(self, name: str, entry: dict[str, Any], *, removing: Sequence[str] = ()) -> str | None:
        """The file's text with the servers `removing` taken out and `entry` under `name`; None
        when that changes nothing."""
        table = self.servers()
        gone = [n for n in removing if n in table and n != name]
        for n in gone:
            table.pop(n)
        if _plain(table.get(name)) == entry and not gone:
            return None
        if self.fmt.kind == "toml":
            return self._toml_with(name, entry)
        doc = self.doc if self.text is not None else {**self.fmt.starts_with, **self.doc}
        doc.setdefault(self.fmt.key, {})[name] = entry
        return self._dump(doc)

    def _toml_with(self, name: str, entry: dict[str, Any]) -> str:
        table = self.doc.get(self.fmt.key)
        if table is None:
            table = tomlkit.table(is_super_table=True)
            self.doc[self.fmt.key] = table
        item = tomlkit.table()
        for key, value in entry.items():
            item[key] = value
        table[name] = item
        return tomlkit.dumps(self.doc)

    def _dump(self, doc: dict[str, Any]) -> str:
        found = _INDENT.search(self.text or "")
        indent = found.group(1) if found else "  "
        return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def read(path: Path, fmt: HostFormat) -> HostFile:
    """The host file at `path` (an absent one reads as empty), or `HostFileError` saying why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HostFile(path, fmt, None, tomlkit.document() if fmt.kind == "toml" else {})
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise HostFileError(f"cannot read {path}: {why}; nothing was written") from None
    if not text.strip():
        return HostFile(path, fmt, text, tomlkit.document() if fmt.kind == "toml" else {})
    return HostFile(path, fmt, text, _parse(path, fmt, text))


def _parse(path: Path, fmt: HostFormat, text: str) -> Any:
    if fmt.kind == "toml":
        try:
            return tomlkit.parse(text)
        except TOMLKitError as e:
            raise HostFileError(
                f"{path} is not valid TOML ({e}); fix it, then run this again; nothing was written"
            ) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (comments are not JSON: remove them, or add the entry by hand from --print)" if "//" in text else ""
        raise HostFileError(
            f"{path} is not valid JSON at line {e.lineno} column {e.colno}: {e.msg}{hint}; "
            "fix it, then run this again; nothing was written"
        ) from None
    if not isinstance(doc, dict):
        raise HostFileError(f"{path} does not hold a JSON object at the top; fix it by hand first; nothing was written")
    return doc
