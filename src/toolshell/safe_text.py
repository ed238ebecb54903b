"""Text from servers and scripts made safe to show a person: no terminal controls, nothing invisible.

A tool name or description, an image's MIME type or a call's input can carry `ESC[2J`, an OSC
title sequence, `ESC[8m` (hidden text), a right-to-left override that makes `drop_prod` read as
something else, a zero-width space that makes two names look alike, a line separator that starts
a new line where none seems to be, or tag characters that carry a hidden message. Every
human-facing output (the CLI, the web page, the approval form sent to an upstream client) passes
such text through `escape` (one field on one line) or `escape_lines` (a block whose newlines and
tabs are layout). Escapes are written the way Python spells them (`\\x1b`, `\\u202e`,
`\\U000e0041`), so what was hidden becomes visible.

The one rule, `HIDDEN`, is every character of these kinds:
- Unicode categories Cc (C0 controls, DEL, C1 controls), Cf (format: bidi embeddings, overrides,
  isolates and marks, zero-width space/joiners, word joiner, invisible operators, BOM, tags, …),
  Zl and Zp (U+2028, U+2029) and Cs (a lone surrogate, which no output can encode);
- the other Default_Ignorable_Code_Points, which render as nothing (U+034F, the Hangul fillers,
  Mongolian variation selectors, variation selectors, U+E0000–E0FFF), except U+FE0E and U+FE0F,
  the text/emoji presentation selectors that ordinary emoji carry.

No regular expression is used (the project does not run Python `re` on server data): the rule is
a `str.translate` table. The web page gets the same ranges from `ranges_text()`, so there is one
definition. `tests/test_escaping.py` checks the table against Python's `unicodedata`.
"""

from __future__ import annotations

HIDDEN: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),  # C0 controls
    (0x007F, 0x009F),  # DEL, C1 controls
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0600, 0x0605),  # Arabic number signs (prepended format characters)
    (0x061C, 0x061C),  # Arabic letter mark
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space, ZWNJ, ZWJ, LRM, RLM
    (0x2028, 0x202E),  # line/paragraph separators, bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated format characters
    (0x3164, 0x3164),  # Hangul filler
    (0xD800, 0xDFFF),  # surrogates (lone ones only reach a Python str)
    (0xFE00, 0xFE0D),  # variation selectors 1-14 (15 and 16 pick text or emoji style)
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFFB),  # reserved ignorables, interlinear annotation
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tags, variation selectors 17-256, reserved ignorables
)
"""The characters `escape` spells out, as inclusive code point ranges."""

LAYOUT = frozenset({0x09, 0x0A})
"""Tab and newline, which `escape_lines` keeps."""


def _spell(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_TABLE = {code: _spell(code) for first, last in HIDDEN for code in range(first, last + 1)}
_TABLE_IN_BLOCK = {code: spelled for code, spelled in _TABLE.items() if code not in LAYOUT}


def escape(text: str) -> str:
    """One line: every hidden character, newline included, spelled as an escape."""
    return text.translate(_TABLE)


def escape_lines(text: str) -> str:
    """A block of lines: newlines and tabs stay; every other hidden character is spelled as an escape."""
    return text.translate(_TABLE_IN_BLOCK)


def is_safe(text: str) -> bool:
    """Whether `text` would show unchanged on one line."""
    return escape(text) == text


def ranges_text() -> str:
    """`HIDDEN` as hex ranges, `0-1f,7f-9f,…`: the form the web page reads its escaper from."""
    return ",".join(f"{first:x}-{last:x}" for first, last in HIDDEN)


__all__ = ["HIDDEN", "LAYOUT", "escape", "escape_lines", "is_safe", "ranges_text"]
