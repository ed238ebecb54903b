"""Hints: short nudges a tool pushes for the model, kept out of the tool's own output (seed 001 §6).

A built-in tool pushes hints while it runs; they travel back to the host in the result's `_meta`
under `io.toolshell/hints`. The host gathers them per session in a `HintAccumulator` and drains
them once per shell call, returning them beside the result instead of inside it.
"""

from __future__ import annotations

from typing import Protocol

import mcp_types as types

HINTS_META_KEY = "io.toolshell/hints"
"""Result `_meta` key holding the hints a call pushed: a list of strings."""


class HintSink(Protocol):
    """Where a tool pushes hints."""

    def push(self, text: str) -> None:
        """Record one hint; a repeat of a hint already held is ignored."""


class HintAccumulator:
    """Hints for one session (or one call), de-duplicated until drained.

    The router gives each call a fresh accumulator and copies it into the result's `_meta`;
    the host keeps one per session and drains it once per shell call.
    """

    def __init__(self) -> None:
        # A dict keeps first-push order and makes the repeat check O(1).
        self._hints: dict[str, None] = {}

    def push(self, text: str) -> None:
        """Record `text` unless it is blank or already held."""
        text = text.strip()
        if text:
            self._hints.setdefault(text, None)

    def extend(self, texts: list[str]) -> None:
        """Push each of `texts` (e.g. `hints_from_result(result)`)."""
        for text in texts:
            self.push(text)

    def drain(self) -> list[str]:
        """Return the held hints in the order first pushed, and forget them."""
        hints, self._hints = list(self._hints), {}
        return hints

    def __len__(self) -> int:
        return len(self._hints)


def hints_from_result(result: types.CallToolResult) -> list[str]:
    """The hints a tool result carries in `_meta` (only strings are kept; anything else is ignored)."""
    raw = (result.meta or {}).get(HINTS_META_KEY)
    if not isinstance(raw, list):
        return []
    return [h for h in raw if isinstance(h, str) and h.strip()]
