"""Text from servers and scripts made safe to show a person: no terminal controls, no bidi tricks.

A tool name or description, an image's MIME type or a call's input can carry `ESC[2J`, an OSC
title sequence, `ESC[8m` (hidden text) or a right-to-left override that makes `drop_prod` read
as something else. Every human-facing output passes such text through `escape` (one field on
one line) or `escape_lines` (a block whose newlines and tabs are layout). Escapes are written the
way Python and JSON spell them (`\\x1b`, `\\u202e`), so what was hidden becomes visible.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, the bidi embeddings/overrides (U+202A-202E) and isolates (U+2066-2069).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _spell(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """One line: every control character, newline included, spelled as an escape."""
    return _UNSAFE.sub(_spell, text)


def escape_lines(text: str) -> str:
    """A block of lines: newlines and tabs stay; every other control is spelled as an escape."""
    return _UNSAFE_IN_BLOCK.sub(_spell, text)


def is_safe(text: str) -> bool:
    """Whether `text` would show unchanged on one line."""
    return _UNSAFE.search(text) is None


__all__ = ["escape", "escape_lines", "is_safe"]
