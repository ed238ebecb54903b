"""The names config and scripts give things: servers and saved scripts. Whole-string matches only
(`fullmatch`: a trailing newline is not part of a name)."""

from __future__ import annotations

import re

from toolshell.errors import ErrorCode, ToolshellError

SERVER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

MAX_NAME = 64
RESERVED_NAMES = frozenset({"save", "delete", "list", "help"})
"""Words of the `tools scripts` grammar, so they cannot name a script."""

SCRIPT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def fold(name: str) -> str:
    """The lookup key of a script name: `-` and `_` are the same character."""
    return name.replace("-", "_")


def check_name(name: str) -> None:
    """Raise `invalid_input` unless `name` can name a saved script."""
    if not name or len(name) > MAX_NAME or not SCRIPT_NAME_RE.fullmatch(name):
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"{name!r} is not a usable script name; use letters, digits, '-' and '_', starting with a letter "
            f"or digit, at most {MAX_NAME} characters (e.g. triage-prs)",
        )
    if fold(name).lower() in RESERVED_NAMES:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"{name!r} is a word of the `tools scripts` command and cannot name a script; pick another name",
        )
