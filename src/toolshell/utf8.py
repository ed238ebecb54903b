"""Text that came in as bytes (argv, stdin, a prompt line) and is not UTF-8.

Python hands undecodable argv and stdin bytes over as lone surrogates (`surrogateescape`), which
nothing downstream can encode: bashkit takes UTF-8 scripts, SQLite UTF-8 text. Such text is
refused at the door with one message naming the first bad byte, instead of failing deep inside.
"""

from __future__ import annotations


def first_bad_byte(text: str) -> tuple[int, int] | None:
    """`(character index, byte)` of the first character that is not UTF-8 text, or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(text[e.start])
        return e.start, code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else code
    return None


def not_utf8(what: str, text: str, *, script: bool = False) -> str | None:
    """The message refusing `text` (described as `what`), or None when it is UTF-8 text."""
    bad = first_bad_byte(text)
    return None if bad is None else bad_byte(what, *bad, script=script)


def bad_byte(what: str, at: int, byte: int, *, script: bool = False) -> str:
    """The message for byte `byte` at character `at` of `what`; a `script` is told how to make bytes."""
    fix = f"write it as UTF-8, and make other bytes inside the script, e.g. printf '\\x{byte:02x}'"
    return f"{what} is not UTF-8 text (byte 0x{byte:02x} at character {at}); {fix if script else 'write it as UTF-8'}"
