"""The value of a shell word in a tree-sitter-bash tree, when it is known before the script runs.

A word is literal when quote removal is all bash would do to it. Anything bash expands at run time
— `$var`, `$(…)`, `$((…))`, an unquoted glob (`*`, `?`, `[`), a brace expansion (`{a,b}`,
`{1..3}`), a leading `~` or one after `name=` — makes it not literal, and `literal_value` returns None.
"""

from __future__ import annotations

import re

from tree_sitter import Node

_ANSI_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_GLOB = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_ASSIGN_TILDE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=~")  # bash expands `~` after an assignment-like `name=`


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _unquoted_word(raw: str) -> str | None:
    """Backslash removal for an unquoted word; None if it holds an unescaped glob or a leading `~`."""
    if raw.startswith("~") or _ASSIGN_TILDE.match(raw):
        return None
    if "\\" not in raw:  # most words: nothing to remove, only globs to look for
        return None if _GLOB.search(raw) else raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            if raw[i + 1] != "\n":  # backslash-newline is a line continuation: both vanish
                out.append(raw[i + 1])
            i += 2
            continue
        if ch in "*?[":
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _double_quoted(node: Node) -> str | None:
    parts: list[str] = []
    for child in node.children:
        if child.type == '"':
            continue
        if child.type != "string_content":
            return None  # an expansion or substitution inside the quotes
        raw = _text(child)
        parts.append(re.sub(r"\\([$`\"\\\n])", lambda m: "" if m.group(1) == "\n" else m.group(1), raw))
    return "".join(parts)


def _ansi_c(raw: str) -> str | None:
    body = raw[2:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] != "\\" or i + 1 == len(body):
            out.append(body[i])
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI_ESCAPES:
            out.append(_ANSI_ESCAPES[nxt])
            i += 2
        elif m := re.match(r"x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})", body[i + 1 :]):
            out.append(chr(int(next(g for g in m.groups() if g), 8 if m.group(4) else 16)))
            i += 1 + len(m.group(0))
        else:
            return None  # a rare escape (`\cX`): leave it to run time rather than guess
    return "".join(out)


def literal_value(node: Node) -> str | None:
    """The word's value after quote removal, or None when bash would expand it at run time.

    Args:
        node: a word-like node: `word`, `number`, `string`, `raw_string`, `ansi_c_string` or a
            `concatenation` of them.
    """
    kind = node.type
    if kind == "word":
        return _unquoted_word(_text(node))
    if kind == "number":
        return _text(node)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        return _double_quoted(node)
    if kind == "ansi_c_string":
        return _ansi_c(_text(node))
    if kind == "concatenation":
        return _concatenation(node)
    return None


def _concatenation(node: Node) -> str | None:
    unquoted = "".join(_text(c) for c in node.children if c.type == "word")
    if _BRACE.search(unquoted) or (node.children and _text(node.children[0]).startswith("~")):
        return None
    parts = [literal_value(c) for c in node.children]
    return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
