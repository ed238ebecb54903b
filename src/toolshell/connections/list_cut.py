"""One `tools/list` page cut to `max_tools` before the SDK builds models of it.

A page within `max_message_bytes` can still offer 100,000 tools; the SDK would turn every one into
a dict and then a `Tool` model (about 5 KB each) before the connection keeps the first
`max_tools`. The bounded transports (`bounded_stdio`, `bounded_http`) hand the answer to a
`tools/list` request through `cut_listing` instead: it walks the raw JSON, keeps the first
`keep` entries of `result.tools` and decodes each dropped one alone (so only one is ever held),
and counts them. The count travels in the page's `_meta` under `CUT_KEY`, sealed with a secret of
this process so a server cannot forge it; `offered` reads it back for `toolshell servers`.

The walk is the stdlib's C decoder on each value (linear time); anything it does not expect
(not an object, no `result.tools` array, a second `result`, nesting past the decoder's depth)
returns None, never raises, and the answer goes the usual way, which refuses it clearly.
"""

from __future__ import annotations

import hmac
import json
import secrets
from json.decoder import scanstring  # type: ignore[attr-defined]  # the decoder's own, untyped
from typing import Any

CUT_KEY = "io.toolshell/cut"
"""Where a cut page's `_meta` says how many tools the server offered."""
SMALL = 64 * 1024
"""Answers shorter than this go the usual way: cutting them would save nothing worth the walk."""
_SEAL = secrets.token_hex(16)
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def cut_listing(text: str, keep: int) -> dict[str, Any] | None:
    """The JSON-RPC message `text` as Python data with `result.tools` cut to `keep` entries and
    the offered count sealed into `result._meta`; None when `text` is short, not such an answer,
    or offers no more than `keep` (then nothing is gained: decode it the usual way)."""
    if len(text) < SMALL:
        return None
    try:
        message, end, offered = _members(text, _skip(text, 0), ("result", "tools"), keep)
    except (ValueError, IndexError, TypeError, RecursionError):  # deep nesting: the usual decoding refuses it
        return None
    if _skip(text, end) != len(text) or offered is None or offered <= keep:
        return None
    result = message.get("result")
    if not isinstance(result, dict):  # a second `result` key replaced the one counted
        return None
    meta = result.get("_meta")
    result["_meta"] = {**(meta if isinstance(meta, dict) else {}), CUT_KEY: {"offered": offered, "seal": _SEAL}}
    return message


def offered(meta: dict[str, Any] | None) -> int | None:
    """The tools a page offered before `cut_listing` kept some, from its `_meta`; None when it was
    not cut here (a count the server wrote itself has no valid seal)."""
    cut = (meta or {}).get(CUT_KEY)
    if not isinstance(cut, dict) or not isinstance(cut.get("offered"), int):
        return None
    seal = cut.get("seal")
    if not isinstance(seal, str) or not hmac.compare_digest(seal.encode(), _SEAL.encode()):
        return None
    count: int = cut["offered"]
    return count


def _skip(text: str, i: int) -> int:
    """Past the JSON whitespace at `i`, by string methods (no regex on what a server sent), in
    windows that double, so a long run costs its length and a short one almost nothing."""
    window = 64
    while i < len(text) and text[i] in _SPACE:
        chunk = text[i : i + window]
        i += len(chunk) - len(chunk.lstrip(_SPACE))
        window *= 2
    return i


def _members(text: str, i: int, path: tuple[str, ...], keep: int) -> tuple[dict[str, Any], int, int | None]:
    """The object at `i`, its end, and the length of the array at `path` inside it (cut to `keep`)."""
    if text[i] != "{":
        raise ValueError("not an object")
    found: dict[str, Any] = {}
    count: int | None = None
    i = _skip(text, i + 1)
    while text[i] != "}":
        key, i = scanstring(text, _expect(text, i, '"'))
        i = _skip(text, _expect(text, _skip(text, i), ":"))
        if key == path[0] and len(path) == 2 and text[i] == "{":
            found[key], i, count = _members(text, i, path[1:], keep)
        elif key == path[0] and len(path) == 1 and text[i] == "[":
            found[key], i, count = _items(text, i, keep)
        else:
            found[key], i = _DECODER.raw_decode(text, i)
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != "}":
            raise ValueError("expected , or }")
    return found, i + 1, count


def _items(text: str, i: int, keep: int) -> tuple[list[Any], int, int]:
    """The first `keep` values of the array at `i`, its end, and how many it holds."""
    kept: list[Any] = []
    count = 0
    i = _skip(text, i + 1)
    while text[i] != "]":
        value, i = _DECODER.raw_decode(text, i)
        if count < keep:
            kept.append(value)
        count += 1
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != "]":
            raise ValueError("expected , or ]")
    return kept, i + 1, count


def _expect(text: str, i: int, char: str) -> int:
    if text[i] != char:
        raise ValueError(f"expected {char}")
    return i + 1
