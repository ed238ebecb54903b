"""Cutting one JSON document down to a byte budget so that it stays valid JSON of the same shape.

Long arrays keep their first items and end with a string counting the rest; long strings are
shortened with a note; objects with many keys keep their first keys and a `"…"` key counting the
rest. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

# (array items, object keys, string characters) kept, from generous to stingy; the first level
# whose JSON fits the budget wins. The last level keeps only the counts, so it fits any sane budget.
_LEVELS = [
    (items, max(items, 8), chars)
    for items, chars in [
        (1000, 4000),
        (500, 2000),
        (200, 1000),
        (100, 500),
        (50, 300),
        (20, 200),
        (10, 120),
        (5, 80),
        (3, 60),
        (2, 40),
        (1, 30),
    ]
] + [(0, 0, 0)]
_NOTE_ROOM = 40
"""A string is shortened only when the note still saves bytes (the note is about this long)."""


def parse_document(text: str) -> tuple[Any, int | None] | None:
    """`text` as one JSON array, object or string, and the indent it was printed with; else None."""
    body = text.strip()
    if not body or body[0] not in '[{"':
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or too deep for Python: cut it as text
        return None
    return value, (2 if "\n" in body else None)


def cut_json(value: Any, budget: int, indent: int | None = None) -> str | None:
    """The JSON of `value`, cut until it takes at most `budget` UTF-8 bytes; None if even the
    stingiest cut does not fit (or the value is too deep to walk)."""
    for items, keys, chars in _LEVELS:
        try:
            text = dump(_shrink(value, items, keys, chars), indent)
        except RecursionError:
            return None
        if len(text.encode("utf-8", "surrogatepass")) <= budget:
            return text
    return None


def dump(value: Any, indent: int | None) -> str:
    separators = (",", ": ") if indent else (",", ":")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)


def _shrink(value: Any, items: int, keys: int, chars: int) -> Any:
    if isinstance(value, str):
        if len(value) <= chars + _NOTE_ROOM:
            return value
        return f"{value[:chars]}… [{len(value) - chars:,} more characters]"
    if isinstance(value, list):
        kept = [_shrink(v, items, keys, chars) for v in value[:items]]
        if len(value) > items:
            kept.append(f"… {len(value) - items:,} more items")
        return kept
    if isinstance(value, dict):
        names = list(value)
        out = {k: _shrink(value[k], items, keys, chars) for k in names[:keys]}
        if len(names) > keys:
            out["…"] = f"{len(names) - keys:,} more keys"
        return out
    return value
