"""Whether Gemini CLI trusts a folder, and what `setup gemini` tells the user about it.

Gemini CLI (0.61, checked against its own bundle) starts no MCP server, not even a user-level one,
in a folder it does not trust: `gemini mcp list` shows it `Disabled` with "MCP servers are
configured but disabled because this folder is untrusted". Trust is on unless
`security.folderTrust.enabled` is false in `~/.gemini/settings.json`, and is kept in
`~/.gemini/trustedFolders.json` (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`): `{path: level}`, where
`TRUST_FOLDER` trusts the path and every folder under it, `TRUST_PARENT` the path's parent and
under, `DO_NOT_TRUST` distrusts them; the longest rule that covers a folder wins, paths compared
after resolving links. A person trusts a folder when Gemini CLI first starts there (it asks), or
with `/permissions trust` inside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HOW = 'start `gemini` there and answer "Trust folder", or type `/permissions trust` in it'


def trust_note(folder: Path, home: Path, env: Mapping[str, str], scope: str) -> str:
    """One or two lines for `setup gemini`: whether Gemini CLI will start the server in `folder`
    (the working directory), and how to trust a folder."""
    trusted = is_trusted(folder, home, env)
    where = "this project" if scope == "project" else "a folder"
    rule = f"Gemini CLI starts MCP servers (yours too) only in folders it trusts; to trust {where}, {HOW}."
    if trusted is None:
        return "Gemini CLI's folder trust is off (security.folderTrust.enabled), so it starts the server everywhere."
    if trusted:
        return f"Gemini CLI trusts {folder}, so it starts the server there. {rule}"
    return f"Gemini CLI does not trust {folder} yet, so it will not start the server there. {rule}"


def is_trusted(folder: Path, home: Path, env: Mapping[str, str]) -> bool | None:
    """Whether Gemini CLI trusts `folder` (None: folder trust is turned off)."""
    settings = _json(home / ".gemini" / "settings.json")
    if _table(_table(settings, "security"), "folderTrust").get("enabled") is False:
        return None
    rules = _json(Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or home / ".gemini" / "trustedFolders.json"))
    where = folder.resolve()
    best, level = -1, None
    for path, trust in rules.items():
        covered = Path(path).parent if trust == "TRUST_PARENT" else Path(path)
        if where.is_relative_to(covered.resolve()) and len(path) > best:
            best, level = len(path), trust
    return level in ("TRUST_FOLDER", "TRUST_PARENT")


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _json(path: Path) -> dict[str, Any]:
    """An object from a JSON file of Gemini CLI's (empty when absent or unreadable). Gemini CLI
    allows comments in it: a file with comments reads as empty here, so trust is not claimed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


__all__ = ["HOW", "is_trusted", "trust_note"]
